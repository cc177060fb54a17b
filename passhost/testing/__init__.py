"""Workloads and test helpers for passhost and its plugins (public API).

* :func:`example` — the program of TVM's *How to Use TVM Pass Infra* tutorial;
* :func:`resnet` — ``tvm.relay.testing.resnet.get_workload``: ``(mod, params)``;
* :func:`random_graph` / :func:`random_inputs` — seeded, well-typed random programs
  and matching inputs, for property tests;
* :func:`chain` — long single-path programs for benchmarks;
* :func:`check_pass` — TVM's before/expected idiom in one call;
* :func:`assert_semantics_preserved` — evaluate before and after a pass and compare;
* :func:`make_dist` / :func:`pip_install` / :func:`run_passhost` — throwaway plugin
  distributions installed into a temporary directory, and the command run against them.
"""
from __future__ import annotations

from .check import as_module, assert_semantics_preserved, check_pass, evaluate_main, run_opt_pass
from .dists import make_dist, pip_install, run_passhost
from .random_graph import KINDS, random_graph, random_inputs
from .workloads import chain, example, resnet, resnet_net, xavier_init

__all__ = [
    "example",
    "resnet",
    "resnet_net",
    "xavier_init",
    "chain",
    "random_graph",
    "random_inputs",
    "KINDS",
    "check_pass",
    "assert_semantics_preserved",
    "run_opt_pass",
    "evaluate_main",
    "as_module",
    "make_dist",
    "pip_install",
    "run_passhost",
]

"""The printing instruments of TVM's pass-instrument tutorial (seed
``tvm-pass-instrument-tutorial-zh.txt``), for tests that reproduce its exception scenarios.

Each instrument prints ``<name> <hook>`` from every hook; the ``PassBad*`` ones print
``<name> bad <hook>!!!`` and raise ``ValueError("<name> bad <hook>")`` from one hook::

    with PassContext(instruments=[PassFine("PassFine_0"), PassBadRunBefore("PassBadRunBefore")]):
        ...
"""
from __future__ import annotations

from typing import Any

from ..instrument import pass_instrument

__all__ = ["PassExampleBase", "PassFine", "PassBadEnterCtx", "PassBadExitCtx", "PassBadRunBefore",
           "PassBadShouldRun", "PassBadRunAfter"]


class PassExampleBase:
    """Print every hook call (the tutorial's base class, not itself an instrument)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def enter_pass_ctx(self) -> None:
        print(self._name, "enter_pass_ctx")

    def exit_pass_ctx(self) -> None:
        print(self._name, "exit_pass_ctx")

    def should_run(self, mod: Any, info: Any) -> bool:
        print(self._name, "should_run")
        return True

    def run_before_pass(self, mod: Any, pass_info: Any) -> None:
        print(self._name, "run_before_pass")

    def run_after_pass(self, mod: Any, pass_info: Any) -> None:
        print(self._name, "run_after_pass")


@pass_instrument
class PassFine(PassExampleBase):
    """Print every hook call; never fails."""


@pass_instrument
class PassBadEnterCtx(PassExampleBase):
    """Fail in ``enter_pass_ctx``."""

    def enter_pass_ctx(self) -> None:
        print(self._name, "bad enter_pass_ctx!!!")
        raise ValueError("{} bad enter_pass_ctx".format(self._name))


@pass_instrument
class PassBadExitCtx(PassExampleBase):
    """Fail in ``exit_pass_ctx``."""

    def exit_pass_ctx(self) -> None:
        print(self._name, "bad exit_pass_ctx!!!")
        raise ValueError("{} bad exit_pass_ctx".format(self._name))


@pass_instrument
class PassBadRunBefore(PassExampleBase):
    """Fail in ``run_before_pass``."""

    def run_before_pass(self, mod: Any, pass_info: Any) -> None:
        print(self._name, "bad run_before_pass!!!")
        raise ValueError("{} bad run_before_pass".format(self._name))


@pass_instrument
class PassBadShouldRun(PassExampleBase):
    """Fail in ``should_run``."""

    def should_run(self, mod: Any, info: Any) -> bool:
        print(self._name, "bad should_run!!!")
        raise ValueError("{} bad should_run".format(self._name))


@pass_instrument
class PassBadRunAfter(PassExampleBase):
    """Fail in ``run_after_pass``."""

    def run_after_pass(self, mod: Any, pass_info: Any) -> None:
        print(self._name, "bad run_after_pass!!!")
        raise ValueError("{} bad run_after_pass".format(self._name))

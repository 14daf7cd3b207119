"""A journaled failure replays as its own class, caught by the same `except` clause."""

from __future__ import annotations

import json

import pytest

from pyrula.errors import BudgetExceeded, StepFailed
from pyrula.runtime.failures import describe_error, rebuild_error
from tests.runtime.error_cases import CASES, Declined, branch_of


def _through_the_store(exc: BaseException, capture: str = "io") -> BaseException:
    return rebuild_error(json.loads(json.dumps(describe_error(exc, capture=capture))))


def _caught(raiser):
    try:
        raiser()
    except BaseException as exc:
        return exc
    raise AssertionError("nothing raised")


@pytest.mark.parametrize("case", sorted(set(CASES) - {"local"}))
def test_each_error_takes_the_same_branch_after_replay(case):
    live = _caught(CASES[case])
    replayed = _through_the_store(live)

    def reraise() -> None:
        raise replayed

    assert branch_of(reraise) == branch_of(CASES[case])
    assert type(replayed) is type(live)
    assert str(replayed) == str(live)


def test_a_class_defined_in_a_function_replays_as_step_failed_naming_it():
    replayed = _through_the_store(_caught(CASES["local"]))

    assert isinstance(replayed, StepFailed) and isinstance(replayed, Exception)
    assert replayed.qualname == "raise_local.<locals>.Local"
    assert str(replayed) == "defined inside a function"
    assert "raise_local.<locals>.Local" in replayed.__notes__[0]


def test_constructor_arguments_and_attributes_survive():
    replayed = _through_the_store(Declined(402, "card declined"))

    assert isinstance(replayed, Declined)
    assert (replayed.code, replayed.detail) == (402, "card declined")


def test_the_cause_chain_is_kept():
    replayed = _through_the_store(_caught(CASES["chained"]))

    assert isinstance(replayed.__cause__, KeyError)
    assert replayed.__cause__.args == ("missing",)


def test_a_key_error_keeps_its_args_not_its_quoted_text():
    replayed = _through_the_store(KeyError("k"))

    assert replayed.args == ("k",) and str(replayed) == "'k'"


def test_below_io_only_the_type_is_kept_and_still_caught():
    described = describe_error(Declined(402, "card 4242 declined"), capture="metadata")

    assert "4242" not in json.dumps(described)
    assert set(described) == {"type", "module", "qualname"}
    assert isinstance(rebuild_error(described), Declined)


def test_a_refusal_keeps_its_code_below_io():
    refusal = BudgetExceeded("cost cap of $1 reached", limit="max_cost_usd", code="cost")
    described = describe_error(refusal, capture="metadata")

    assert described["code"] == "cost" and "message" not in described
    assert isinstance(rebuild_error(described), BudgetExceeded)


def test_a_record_from_before_full_names_still_replays():
    assert isinstance(rebuild_error({"type": "ValueError", "message": "x"}), ValueError)
    assert isinstance(rebuild_error({"type": "NoSuchThing", "message": "x"}), StepFailed)


def test_a_name_that_is_not_an_exception_is_never_followed():
    forged = {"type": "system", "module": "os", "qualname": "system", "message": "echo hi"}

    assert isinstance(rebuild_error(forged), StepFailed)

"""The simulated node rejects wrongly typed sampling fields with 400, as vLLM does."""

import pytest

from testbed.simnode.validate import invalid_field


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("temperature", "hot"),
        ("temperature", -1),
        ("n", 0),
        ("n", "2"),
        ("stream", "yes"),
        ("stream", 1),
        ("top_p", 0),
        ("stream_options", []),
        ("seed", 1.5),
    ],
)
def test_invalid_values_are_named(field: str, value: object) -> None:
    found = invalid_field({"model": "m", field: value})
    assert found is not None and found[0] == field and field in found[1]


def test_valid_and_null_values_pass() -> None:
    assert (
        invalid_field(
            {
                "temperature": 0.7,
                "n": 1,
                "stream": True,
                "top_p": 1,
                "seed": 3,
                "stream_options": {"include_usage": True},
                "max_tokens": None,
                "temperature_unused": "x",
                "n_unused": None,
            }
        )
        is None
    )
    assert invalid_field({"temperature": None, "stream": None}) is None

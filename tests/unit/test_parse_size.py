"""Parsing sizes given on the command line."""

from __future__ import annotations

import pytest
import typer

from orchestrator.cli.common import parse_size


@pytest.mark.parametrize(
    "text, expected",
    [
        ("512m", 512 * 1024**2),
        ("512M", 512 * 1024**2),
        ("2g", 2 * 1024**3),
        ("1.5GiB", 3 * 1024**3 // 2),
        ("1.5gb", 3 * 1024**3 // 2),
        ("64k", 64 * 1024),
        ("1048576", 1048576),
        ("0", 0),
        (" 256 MiB ", 256 * 1024**2),
    ],
)
def test_sizes_with_and_without_units_are_parsed_in_bytes(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "m", "-1", "5t", "1e6", "1,000", "2 g b c", "1.5.2g", "0x10"])
def test_malformed_sizes_are_bad_parameters(text):
    with pytest.raises(typer.BadParameter) as info:
        parse_size(text)
    assert repr(text) in str(info.value)

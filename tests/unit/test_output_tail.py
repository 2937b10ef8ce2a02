"""The bounded tail of a policy's stdout and stderr."""

from __future__ import annotations

import contextlib

import pytest

from epg_sdk.runtime.policy_runtime import OutputTail


def test_keeps_only_the_last_limit_characters_after_many_writes():
    tail = OutputTail(1000)
    lines = [f"line {index:05d}\n" for index in range(10_000)]
    for line in lines:
        assert tail.write(line) == len(line)
    expected = "".join(lines)[-1000:]
    assert tail.tail() == expected.encode()
    assert tail.tail().endswith(b"line 09999\n")


def test_memory_stays_bounded_while_writing():
    tail = OutputTail(100)
    for _ in range(10_000):
        tail.write("x" * 50)
        assert sum(len(chunk) for chunk in tail._chunks) <= 2 * 100 + 4096 + 50


def test_short_output_is_kept_whole():
    tail = OutputTail(100)
    tail.write("hello ")
    tail.write("world")
    assert tail.tail() == b"hello world"


def test_nothing_written_gives_an_empty_tail():
    assert OutputTail(10).tail() == b""


def test_a_single_write_longer_than_the_limit_is_cut_to_its_end():
    tail = OutputTail(10)
    tail.write("0123456789abcdefghij" * 500)
    assert tail.tail() == b"abcdefghij"


def test_reading_the_tail_twice_gives_the_same_bytes():
    tail = OutputTail(20)
    for index in range(100):
        tail.write(f"{index},")
    assert tail.tail() == tail.tail()


def test_lowering_the_limit_shortens_the_tail():
    tail = OutputTail(100)
    tail.write("a" * 50 + "b" * 50)
    tail.set_limit(10)
    assert tail.tail() == b"b" * 10


@pytest.mark.parametrize("value", [b"bytes", 42, None, ["list"]], ids=repr)
def test_writing_a_non_string_is_a_type_error(value):
    tail = OutputTail(100)
    with pytest.raises(TypeError):
        tail.write(value)
    assert tail.tail() == b""


def test_print_and_redirect_stdout_write_into_the_tail():
    tail = OutputTail(100)
    assert tail.writable()
    with contextlib.redirect_stdout(tail):
        print("from print", 1, 2)
    assert tail.tail() == b"from print 1 2\n"

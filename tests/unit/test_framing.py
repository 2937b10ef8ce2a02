"""Length-prefixed protobuf frames over a stream socket."""

from __future__ import annotations

import os
import socket
import struct
import threading
import time

import pytest

from epg.v1 import values_pb2 as pb
from epg_sdk.protocol.framing import FramedSocket, FrameTimeout, FramingError, PeerClosed


@pytest.fixture
def pair():
    left, right = socket.socketpair()
    framed_left, framed_right = FramedSocket(left), FramedSocket(right)
    yield framed_left, framed_right
    framed_left.close()
    framed_right.close()


def text(value: str) -> pb.Value:
    return pb.Value(text=value)


def frame(body: bytes) -> bytes:
    return struct.pack("<I", len(body)) + body


def test_messages_sent_back_to_back_arrive_in_order(pair):
    sender, receiver = pair
    messages = [text(f"message {i}" * (i + 1)) for i in range(20)] + [pb.Value(int64=-3), pb.Value()]
    for message in messages:
        sender.send(message)
    received = [receiver.receive(pb.Value()) for _ in messages]
    assert received == messages


def test_several_frames_in_one_send_are_all_delivered(pair):
    sender, receiver = pair
    bodies = [text("a").SerializeToString(), b"", pb.Value(float64=2.5).SerializeToString()]
    sender.socket.sendall(b"".join(frame(b) for b in bodies))
    assert [receiver.receive_bytes() for _ in bodies] == bodies


def test_a_frame_split_across_many_small_sends_is_reassembled(pair):
    sender, receiver = pair
    message = text("x" * 300)
    data = frame(message.SerializeToString()) * 2

    def dribble():
        for index in range(len(data)):
            sender.socket.send(data[index : index + 1])

    thread = threading.Thread(target=dribble)
    thread.start()
    try:
        assert receiver.receive(pb.Value(), deadline=time.monotonic() + 10) == message
        assert receiver.receive(pb.Value(), deadline=time.monotonic() + 10) == message
    finally:
        thread.join()


def test_a_large_frame_spanning_many_reads_is_reassembled(pair):
    sender, receiver = pair
    message = pb.Value(raw=bytes(range(256)) * 4096)  # 1 MiB, larger than one read chunk

    thread = threading.Thread(target=sender.send, args=(message,))
    thread.start()
    try:
        assert receiver.receive(pb.Value()) == message
    finally:
        thread.join()


def test_frame_above_the_limit_is_a_framing_error():
    left, right = socket.socketpair()
    receiver = FramedSocket(right, max_frame_bytes=10)
    try:
        left.sendall(frame(b"\x01" * 10) + frame(b"\x01" * 11))
        assert receiver.receive_bytes() == b"\x01" * 10
        with pytest.raises(FramingError, match="11 bytes"):
            receiver.receive_bytes()
    finally:
        left.close()
        right.close()


def test_oversized_frame_is_rejected_from_its_header_alone():
    left, right = socket.socketpair()
    receiver = FramedSocket(right, max_frame_bytes=1024)
    try:
        left.sendall(struct.pack("<I", 2**32 - 1))
        with pytest.raises(FramingError):
            receiver.receive_bytes(deadline=time.monotonic() + 5)
    finally:
        left.close()
        right.close()


def test_undecodable_bytes_are_a_framing_error(pair):
    sender, receiver = pair
    sender.socket.sendall(frame(b"\x0f\xff\xff"))
    with pytest.raises(FramingError, match="undecodable"):
        receiver.receive(pb.Value())


def test_peer_close_between_frames_is_peer_closed(pair):
    sender, receiver = pair
    sender.send(text("last"))
    sender.close()
    assert receiver.receive(pb.Value()) == text("last")
    with pytest.raises(PeerClosed) as info:
        receiver.receive(pb.Value())
    assert "mid-frame" not in str(info.value)


@pytest.mark.parametrize("partial", [b"\x05\x00", frame(b"abcdef")[:-2]], ids=["in header", "in body"])
def test_peer_close_in_the_middle_of_a_frame_is_peer_closed(pair, partial):
    sender, receiver = pair
    sender.socket.sendall(partial)
    sender.close()
    with pytest.raises(PeerClosed, match="mid-frame"):
        receiver.receive_bytes()


def test_sending_to_a_closed_peer_is_peer_closed(pair):
    sender, receiver = pair
    receiver.close()
    with pytest.raises(PeerClosed):
        for _ in range(100):  # the first sends may still land in the kernel buffer
            sender.send(pb.Value(raw=b"x" * 65536))


def test_nothing_arriving_before_the_deadline_is_a_frame_timeout(pair):
    _sender, receiver = pair
    start = time.monotonic()
    with pytest.raises(FrameTimeout):
        receiver.receive(pb.Value(), deadline=start + 0.05)
    elapsed = time.monotonic() - start
    assert 0.045 <= elapsed < 2.0


def test_a_deadline_already_passed_times_out_at_once(pair):
    _sender, receiver = pair
    start = time.monotonic()
    with pytest.raises(FrameTimeout):
        receiver.receive_bytes(deadline=start - 1)
    assert time.monotonic() - start < 0.5


def test_a_complete_frame_already_buffered_is_returned_despite_a_passed_deadline(pair):
    sender, receiver = pair
    sender.socket.sendall(frame(b"one") + frame(b"two"))
    assert receiver.receive_bytes() == b"one"
    assert receiver.receive_bytes(deadline=time.monotonic() - 1) == b"two"


def test_a_frame_sent_after_a_timeout_can_still_be_read(pair):
    sender, receiver = pair
    with pytest.raises(FrameTimeout):
        receiver.receive(pb.Value(), deadline=time.monotonic() + 0.05)
    sender.send(text("late"))
    assert receiver.receive(pb.Value()) == text("late")


def test_a_frame_interrupted_by_a_timeout_is_completed_by_a_later_read(pair):
    sender, receiver = pair
    data = frame(text("split").SerializeToString())
    sender.socket.sendall(data[:3])
    with pytest.raises(FrameTimeout):
        receiver.receive(pb.Value(), deadline=time.monotonic() + 0.05)
    sender.socket.sendall(data[3:])
    assert receiver.receive(pb.Value(), deadline=time.monotonic() + 5) == text("split")


def test_a_read_without_deadline_after_a_timed_read_blocks_again(pair):
    sender, receiver = pair
    with pytest.raises(FrameTimeout):
        receiver.receive_bytes(deadline=time.monotonic() + 0.01)
    sender.send(text("eventually"))
    assert receiver.receive(pb.Value(), deadline=None) == text("eventually")
    timeval = receiver.socket.getsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.calcsize("@ll"))
    assert struct.unpack("@ll", timeval) == (0, 0)


def test_large_and_small_frames_interleaved_arrive_intact_through_the_reused_buffer(pair):
    sender, receiver = pair
    messages = [pb.Value(raw=bytes([i]) * (70_000 if i % 3 == 0 else 100 + i)) for i in range(12)]

    def send_all():
        for message in messages:
            sender.send(message)

    thread = threading.Thread(target=send_all)
    thread.start()
    try:
        for message in messages:
            assert receiver.receive(pb.Value(), deadline=time.monotonic() + 10) == message
    finally:
        thread.join()


def test_descriptors_sent_with_a_frame_are_received_with_it(pair):
    sender, receiver = pair
    read_end, write_end = os.pipe()
    try:
        sender.send(text("with a descriptor"), descriptors=[write_end])
        message, descriptors = receiver.receive_with_descriptors(pb.Value(), deadline=time.monotonic() + 5)
        assert message == text("with a descriptor")
        assert len(descriptors) == 1
        os.write(descriptors[0], b"through the passed descriptor")
        os.close(descriptors[0])
        assert os.read(read_end, 100) == b"through the passed descriptor"
    finally:
        os.close(read_end)
        os.close(write_end)


def test_descriptors_a_plain_receive_does_not_ask_for_are_dropped(pair):
    sender, receiver = pair
    read_end, write_end = os.pipe()
    before = set(os.listdir("/proc/self/fd"))
    try:
        sender.send(text("unasked"), descriptors=[write_end])
        assert receiver.receive(pb.Value(), deadline=time.monotonic() + 5) == text("unasked")
        assert set(os.listdir("/proc/self/fd")) <= before  # the kernel closed the copy that came with the frame
    finally:
        os.close(read_end)
        os.close(write_end)

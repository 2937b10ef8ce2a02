"""Baseline: find the green and red cells in the frame and step towards the red one, x first."""

from evopolicygym.policy import PolicyContext, PolicyValue, TensorValue

GREEN, RED = b"\x00\xff\x00", b"\xff\x00\x00"


def locate(frame: TensorValue, colour: bytes) -> tuple[int, int]:
    height, width, _ = frame.shape
    for index in range(height * width):
        if frame.data[index * 3:index * 3 + 3] == colour:
            return index % width, index // width
    raise ValueError("colour not in frame")


class Walker:
    def act(self, observation: PolicyValue) -> PolicyValue:
        assert isinstance(observation, dict)
        frame = observation["frame"]
        assert isinstance(frame, TensorValue)
        (ax, ay), (tx, ty) = locate(frame, GREEN), locate(frame, RED)
        if tx != ax:
            return 4 if tx > ax else 3
        if ty != ay:
            return 2 if ty > ay else 1
        return 0


def make_policy(context: PolicyContext) -> Walker:
    del context
    return Walker()

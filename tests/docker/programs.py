"""Program sources shared by the engine tests."""

# Balances CartPole for all 500 steps on every seed the tests use.
STEADY = """
class Policy:
    def act(self, observation):
        return 1 if observation[2] + 0.5 * observation[3] > 0 else 0

def make_policy(context):
    return Policy()
"""

# Allocates 16 MiB at a time in its first act until the memory limit stops it.
MEMORY_BOMB = """
hoard = []

class Policy:
    def act(self, observation):
        while True:
            hoard.append(bytearray(16 * 1024 * 1024))

def make_policy(context):
    return Policy()
"""

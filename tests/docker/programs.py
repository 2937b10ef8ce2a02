"""Program sources shared by the engine tests."""

# Balances CartPole for all 500 steps on every seed the tests use.
STEADY = """
class Policy:
    def act(self, observation):
        return 1 if observation[2] + 0.5 * observation[3] > 0 else 0

def make_policy(context):
    return Policy()
"""

"""Always push left: a Program that runs, whatever the Benchmark's faults."""


class AlwaysLeft:
    def act(self, observation):
        return 0


def make_policy(context):
    return AlwaysLeft()

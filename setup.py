"""Build hook: the wheel carries the bundled environments/ as orchestrator/bundled_environments.

The catalogue (orchestrator.images.catalogue.bundled_environments) looks there
first, so a non-editable install still finds the bundled Benchmarks; an editable
install finds environments/ in the checkout instead. Everything else is in pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

_HERE = Path(__file__).resolve().parent
_LEFT_OUT = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".*", "build", "dist", "node_modules")


class BuildWithEnvironments(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "orchestrator" / "bundled_environments"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(_HERE / "environments", target, ignore=_LEFT_OUT)


setup(cmdclass={"build_py": BuildWithEnvironments})

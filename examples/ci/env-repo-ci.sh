#!/bin/sh
# CI of an environment repository: build its images offline, check the environment, publish the
# images to a registry; another machine pulls them instead of building.
#
#   examples/ci/env-repo-ci.sh build | test | push | pull
#
# Settings (environment variables):
#   EPG           the orchestrator's command        (default: epg-orchestrate)
#   ENVIRONMENTS  the directory of environment packages, as for --environments (default: environments)
#   ENV_IMAGE     the repository's environment image (default: env-cartpole)
#   BENCHMARK     a Benchmark of that image, for `env test` (default: cartpole)
#   REGISTRY      HOST[:PORT] of the registry, for push and pull
#   OUT           where the JSON reports go          (default: ci-out)
#   PUSHED        the push's report, for pull: every image pulled must be the one pushed
#                 (default: $OUT/push.json, when it exists)
#
# Every step writes its JSON report to $OUT/STEP.json; tests/docker/test_ci_workflow.py runs
# these steps, through the workflow, against a registry on loopback.
set -eu
EPG=${EPG:-epg-orchestrate}
ENVIRONMENTS=${ENVIRONMENTS:-environments}
ENV_IMAGE=${ENV_IMAGE:-env-cartpole}
BENCHMARK=${BENCHMARK:-cartpole}
OUT=${OUT:-ci-out}
IMAGES="policy-runtime $ENV_IMAGE"
mkdir -p "$OUT"

case "${1:-}" in
build)  # only images whose inputs changed are built
    $EPG images build $IMAGES --environments "$ENVIRONMENTS" --json > "$OUT/build.json" ;;
test)   # conformance checks and the baseline Program, in the built image
    $EPG env test "$BENCHMARK" --environments "$ENVIRONMENTS" ;;
push)
    $EPG images push --registry "${REGISTRY:?set REGISTRY=HOST[:PORT]}" $IMAGES --environments "$ENVIRONMENTS" --json > "$OUT/push.json" ;;
pull)   # then `images build` finds these images up to date
    PUSHED=${PUSHED:-$OUT/push.json}
    if [ -f "$PUSHED" ]; then set -- --pushed "$PUSHED"; else set --; fi
    $EPG images pull --registry "${REGISTRY:?set REGISTRY=HOST[:PORT]}" $IMAGES --environments "$ENVIRONMENTS" "$@" --json > "$OUT/pull.json" ;;
*)
    echo "usage: $0 build | test | push | pull" >&2
    exit 2 ;;
esac

"""The four Benchmarks: HalfCheetah-v5, Ant-v5, Pusher-v5 and Reacher-v5 with gymnasium's default keyword arguments."""

from __future__ import annotations

from typing import Any

import numpy as np

from epg_env_mujoco.mujoco_benchmark import MujocoBenchmark, Task
from epg_sdk.benchmark import Benchmark
from epg_sdk.gym_adapter import probe_environment
from epg_sdk.readme import package_readme

HALFCHEETAH_ID, ANT_ID, PUSHER_ID, REACHER_ID = "HalfCheetah-v5", "Ant-v5", "Pusher-v5", "Reacher-v5"
HORIZONS = {HALFCHEETAH_ID: 1000, ANT_ID: 1000, PUSHER_ID: 100, REACHER_ID: 50}  # gymnasium's max_episode_steps
# What a failed Episode counts: below every completed Episode of any Program within the action bounds
# (the largest control cost of every step, plus generous room for moving backwards or far away).
FAILURE_RETURNS = {HALFCHEETAH_ID: -5000.0, ANT_ID: -10000.0, PUSHER_ID: -1000.0, REACHER_ID: -200.0}


def _ctrl_cost(info: dict[str, Any]) -> float:
    return -float(info.get("reward_ctrl", 0.0))


def _distance(env: Any, a: str, b: str) -> float:
    return float(np.linalg.norm(env.get_body_com(a) - env.get_body_com(b)))


def _locomotion_measure(env: Any, info: dict[str, Any]) -> dict[str, float]:
    return {"x": float(env.data.qpos[0]), "x_velocity": float(info.get("x_velocity", 0.0)),
            "control_cost": _ctrl_cost(info), "forward_reward": float(info.get("reward_forward", 0.0))}


def _halfcheetah_summary(first, last, totals, minima, steps) -> dict[str, Any]:
    return {
        "x_distance_m": last["x"] - first["x"],
        "mean_x_velocity_mps": totals.get("x_velocity", 0.0) / steps if steps else 0.0,
        "control_cost": totals.get("control_cost", 0.0),
        "forward_reward": totals.get("forward_reward", 0.0),
    }


def _ant_measure(env: Any, info: dict[str, Any]) -> dict[str, float]:
    return {**_locomotion_measure(env, info), "z": float(env.data.qpos[2]), "healthy": float(bool(env.is_healthy)),
            "contact_cost": -float(info.get("reward_contact", 0.0))}


def _ant_summary(first, last, totals, minima, steps) -> dict[str, Any]:
    return {
        **_halfcheetah_summary(first, last, totals, minima, steps),
        "healthy_steps": int(totals.get("healthy", 0.0)),
        "contact_cost": totals.get("contact_cost", 0.0),
        "final_torso_z_m": last["z"],
    }


def _pusher_measure(env: Any, info: dict[str, Any]) -> dict[str, float]:
    return {"object_goal": _distance(env, "object", "goal"), "fingertip_object": _distance(env, "object", "tips_arm"),
            "control_cost": _ctrl_cost(info)}


def _pusher_summary(first, last, totals, minima, steps) -> dict[str, Any]:
    return {
        "final_object_goal_distance_m": last["object_goal"],
        "min_object_goal_distance_m": minima.get("object_goal", first["object_goal"]),
        "initial_object_goal_distance_m": first["object_goal"],
        "final_fingertip_object_distance_m": last["fingertip_object"],
        "control_cost": totals.get("control_cost", 0.0),
    }


def _reacher_measure(env: Any, info: dict[str, Any]) -> dict[str, float]:
    return {"fingertip_target": _distance(env, "fingertip", "target"), "control_cost": _ctrl_cost(info)}


def _reacher_summary(first, last, totals, minima, steps) -> dict[str, Any]:
    return {
        "final_fingertip_target_distance_m": last["fingertip_target"],
        "min_fingertip_target_distance_m": minima.get("fingertip_target", first["fingertip_target"]),
        "initial_fingertip_target_distance_m": first["fingertip_target"],
        "control_cost": totals.get("control_cost", 0.0),
    }


_LOCOMOTION_COLUMNS = ("x_distance_m", "mean_x_velocity_mps", "control_cost", "forward_reward")
TASKS = {
    HALFCHEETAH_ID: Task(_locomotion_measure, _halfcheetah_summary,
                         lambda m, t: f"t{t} x{m['x']:+.2f} v{m['x_velocity']:+.2f}", 50, _LOCOMOTION_COLUMNS),
    ANT_ID: Task(_ant_measure, _ant_summary,
                 lambda m, t: f"t{t} x{m['x']:+.2f} v{m['x_velocity']:+.2f} z{m['z']:.2f}", 50,
                 (*_LOCOMOTION_COLUMNS, "healthy_steps", "contact_cost", "final_torso_z_m")),
    PUSHER_ID: Task(_pusher_measure, _pusher_summary,
                    lambda m, t: f"t{t} og{m['object_goal']:.3f} fo{m['fingertip_object']:.3f}", 10,
                    ("final_object_goal_distance_m", "min_object_goal_distance_m", "initial_object_goal_distance_m",
                     "final_fingertip_object_distance_m", "control_cost")),
    REACHER_ID: Task(_reacher_measure, _reacher_summary,
                     lambda m, t: f"t{t} d{m['fingertip_target']:.3f}", 5,
                     ("final_fingertip_target_distance_m", "min_fingertip_target_distance_m",
                      "initial_fingertip_target_distance_m", "control_cost")),
}

DESCRIPTIONS = {
    HALFCHEETAH_ID: (
        "Make a 2-D cheetah run forwards (+x). Observation: float64[17] (8 joint positions without the x "
        "position, then 9 velocities). Action: float32[6] torques in [-1, 1]. Reward per step: forward "
        "velocity - 0.1 |a|^2. 1000 steps, no early end."
    ),
    ANT_ID: (
        "Make a 3-D four-legged ant walk forwards (+x). Observation: float64[105] (13 positions without x, y; "
        "14 velocities; 78 clipped contact forces). Action: float32[8] torques in [-1, 1]. Reward per step: "
        "1 while healthy + x velocity - 0.5 |a|^2 - 5e-4 |contact forces|^2. Ends when the torso height "
        "leaves [0.2, 1.0] (unhealthy), else after 1000 steps."
    ),
    PUSHER_ID: (
        "Push a puck to a goal with a 7-joint arm. Observation: float64[23] (7 joint angles, 7 joint "
        "velocities, fingertip, object and goal xyz). Action: float32[7] torques in [-2, 2]. Reward per "
        "step: -|object-goal| - 0.5 |fingertip-object| - 0.1 |a|^2. 100 steps."
    ),
    REACHER_ID: (
        "Move a 2-joint arm's fingertip to a target. Observation: float64[10] (cos and sin of both joint "
        "angles, target xy, 2 joint velocities, fingertip-target xy). Action: float32[2] torques in [-1, 1]. "
        "Reward per step: -|fingertip-target| - |a|^2. 50 steps."
    ),
}


def _parameters(env_id: str) -> dict[str, Any]:
    with probe_environment(env_id) as env:
        names = [name for name in ("_forward_reward_weight", "_ctrl_cost_weight", "_contact_cost_weight", "_healthy_reward",
                                   "_reward_dist_weight", "_reward_near_weight", "_reward_control_weight",
                                   "_reset_noise_scale") if hasattr(env, name)]
        parameters: dict[str, Any] = {name.lstrip("_"): float(getattr(env, name)) for name in names}
        if hasattr(env, "_healthy_z_range"):
            parameters["healthy_z_range"] = [float(z) for z in env._healthy_z_range]
        parameters["dt"] = float(env.dt)
        parameters["frame_skip"] = int(env.frame_skip)
        return parameters


def _make(env_id: str) -> Benchmark:
    return MujocoBenchmark(env_id=env_id, description=DESCRIPTIONS[env_id], horizon=HORIZONS[env_id],
                           failure_return=FAILURE_RETURNS[env_id], parameters=_parameters(env_id),
                           readme=package_readme(__file__), task=TASKS[env_id])


def make_halfcheetah_benchmark() -> Benchmark:
    return _make(HALFCHEETAH_ID)


def make_ant_benchmark() -> Benchmark:
    return _make(ANT_ID)


def make_pusher_benchmark() -> Benchmark:
    return _make(PUSHER_ID)


def make_reacher_benchmark() -> Benchmark:
    return _make(REACHER_ID)

"""The compile side: an algorithm traced into a casadi.Function (trace, derivatives, staging),
its C (emit, schedule, sincos, statements, escape; the batched entry point: vectorise),
compiled and cached (build), packaged (package), made again from a manifest (rebuild); the C of the
compiled contact kinds (contact_step, contact_rollout, step_derivatives, mujoco_step) and of cd.mujoco_rollout
(mujoco_rollout), their mathematics taken from contact/ and mujoco_model/.
Loading and calling what it writes is the runtime's (casadi_delassus/runtime/), which never
imports this package but for rebuild on a dask worker."""

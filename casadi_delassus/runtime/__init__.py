"""The runtime: loading generated code and calling it (single calls and batches).

artifact (the manifest and its checks), library (mapping and checking the .so), inputs (the
values a call accepts), door (the C extension: single calls and the one batch runtime,
door.c), batch (batches from Python), loader (CompiledFunction, StagedFunction, load),
distributed (dask); the compiled contact kinds loaded and called (contact_step, contact_rollout,
step_derivatives, mujoco_step; mujoco_rollout for cd.mujoco_rollout).  It never imports the compile side (codegen/), save the one import a
dask worker makes to compile a .so it cannot see (tests/project/test_imports.py)."""

# casadi_delassus: `make demo` runs the main job on the built-in Talos; `make test` the tests.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup demo test test-all bench clean

setup: $(STAMP)

# --no-compile: pip byte-compiles every module of every package it installs (a third of setup's time); Python
# compiles what a run imports, and make test keeps those .pyc files.
$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --no-compile -e '.[test,plot,bench,distributed,mjcf,docs,progress]'
	# Atlas (Drake's atlas v5 URDF) ships inside gym-jiminy-zoo; its own deps are not needed.
	-$(PY) -m pip install --quiet --no-compile --no-deps gym-jiminy-zoo==1.8.13
	# dm_control's MJCF models (the suite, ball joints, CMU humanoid, dog) are read as files only.
	-$(PY) -m pip install --quiet --no-compile --no-deps dm_control==1.0.50
	# Unitree Go2's MJCF (bench/simulate.py's MuJoCo scene) ships in robosuite-models, read as a file only.
	-$(PY) -m pip install --quiet --no-compile --no-deps robosuite-models==1.0.0
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m casadi_delassus demo

# One worker per core (the 15 slowest tests listed at the end); --dist loadfile keeps a test file (and the functions it compiles once per
# session) on one worker.  `make test` leaves out the tests marked slow (compile-heavy or robot-scale
# repeats of a check a fast test also makes); `make test-all` runs them too.
# PYTHONDONTWRITEBYTECODE unset for the run: the tests start Python in a subprocess for the CLI, the examples and the
# docs' commands, and where the environment forbids .pyc files each start compiled the package's sources again
# (tests/cli/test_cli.py: 68 -> 58 s of CPU); the .pyc files go to __pycache__/, which git ignores.
PYTEST := PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -x -n auto --dist loadfile --durations=15

# mypy: the type check of the public API ([tool.mypy] in pyproject.toml: the modules and settings; ~10 s)
# make test compiles the generated C at -O0 (CASADI_DELASSUS_AUTO_LEVEL, codegen/build.py): its tests check values,
# not speed, and gcc at the sizes' levels took about a third of the suite's CPU; make test-all keeps those levels.
test: $(STAMP)
	$(PY) -m mypy
	CASADI_DELASSUS_AUTO_LEVEL=-O0 $(PYTEST) -m "not slow"

test-all: $(STAMP)
	$(PY) -m mypy
	$(PYTEST)

bench: $(STAMP)
	$(PY) bench/opcount_figures.py
	$(PY) bench/compile_times.py pipeline
	$(PY) bench/runtime.py

clean:
	rm -rf codegen_out bench/results .pytest_cache site

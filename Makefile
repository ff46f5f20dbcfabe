# casadi_delassus: `make demo` runs the main job on the built-in Talos; `make test` the tests.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup demo test bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,plot,bench,distributed,mjcf,docs]'
	# Atlas (Drake's atlas v5 URDF) ships inside gym-jiminy-zoo; its own deps are not needed.
	-$(PY) -m pip install --quiet --no-deps gym-jiminy-zoo==1.8.13
	# dm_control's MJCF models (the suite, ball joints, CMU humanoid, dog) are read as files only.
	-$(PY) -m pip install --quiet --no-deps dm_control==1.0.50
	# Unitree Go2's MJCF (bench/simulate.py's MuJoCo scene) ships in robosuite-models, read as a file only.
	-$(PY) -m pip install --quiet --no-deps robosuite-models==1.0.0
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m casadi_delassus demo

test: $(STAMP)
	$(PY) -m pytest -q -x

bench: $(STAMP)
	$(PY) bench/opcount_figures.py
	$(PY) bench/compile_times.py pipeline
	$(PY) bench/runtime.py

clean:
	rm -rf codegen_out bench/results .pytest_cache site

"""What fuzzing the newer surfaces found (issue 23, "Found by fuzzing the new surfaces",
points 1-9), one test (or a few) per point: a Dask address whose peer never answers or is no
Dask scheduler, a narrower library rerun into the same folder, ``out=`` overlapping the input,
spec offsets beyond the model-number range, ``check``'s numbers, odd ``--modes`` values,
stray arguments, control characters in names, and the missing-meshes fallback's time.
Loopback servers are started here, bound to 127.0.0.1 and stopped at the end of each test."""
import io
import json
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import casadi_delassus as cd
from casadi_delassus import progress, report
from casadi_delassus.names import printable
from casadi_delassus.api import constraint_set
from casadi_delassus.contact_modes import library
from casadi_delassus.contact_modes.modes import parse_modes
from casadi_delassus.errors import ConstraintError, InputError

from cli_runner import run_cli
from conftest import model_for

FEET = ["FL_foot:3d", "FR_foot:3d", "RL_foot:3d", "RR_foot:3d"]
Q0 = np.r_[np.zeros(6), 1.0, np.zeros(12)]


def run(*args, timeout=120):
    """The CLI (forked from the preloaded server, tests/cli_runner.py): (CompletedProcess, seconds)."""
    t0 = time.perf_counter()
    r = run_cli(*args, timeout=timeout)
    return r, time.perf_counter() - t0


def refused(r, *words):
    """Exit 2 with one line on stderr holding ``words``, no traceback."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


# -- 1. --cluster against peers that are not a working Dask scheduler -------------------------
class Peer:
    """A loopback TCP server that accepts and then sends ``reply`` (and holds the connection
    open when ``hold``, else closes it); None as ``reply`` sends nothing."""

    def __init__(self, reply=None, hold=True):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.reply, self.hold, self.conns = reply, hold, []
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stop.is_set():
            try:
                c, _ = self.sock.accept()
            except OSError:
                continue
            if self.reply:
                c.sendall(self.reply)
            if self.hold:
                self.conns.append(c)
            else:
                c.close()

    def __enter__(self):
        return f"tcp://127.0.0.1:{self.port}"

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(5)
        for c in self.conns:
            c.close()
        self.sock.close()


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"tcp://127.0.0.1:{port}"


HTTP = b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n\r\nBad Request"[:64]


def library_on(address, tmp_path, *options):
    return run("library", "go1", "-s", "4F3", "-a", "pv_osim", "--modes", "0x1", "--cflags", "-O0",
               "-o", str(tmp_path), "--cluster", address, *options, timeout=90)


@pytest.mark.parametrize("peer", ["silent", "http", "closes"])
def test_cluster_peer_that_is_no_scheduler_is_one_line(tmp_path, peer):
    with Peer(reply={"silent": None, "http": HTTP, "closes": b"x"}[peer], hold=peer != "closes") as address:
        r, seconds = library_on(address, tmp_path, "--cluster-timeout", "1.5")
    refused(r, address, *(["sent nothing in 1.5 s"] if peer == "silent" else []))
    assert seconds < 60 and not list(tmp_path.rglob("*.so"))


@pytest.mark.parametrize("seconds", ["0", "-1", "nan", "soon"])
def test_cluster_timeout_is_a_positive_number(tmp_path, seconds):
    r, _ = library_on(closed_port(), tmp_path, "--cluster-timeout", seconds)
    refused(r, "--cluster-timeout")


def test_cluster_closed_port_fails_fast(tmp_path):
    """A refused port is one line at once, not dask's retries until the timeout: with a timeout of 60 s, the run
    (the Python start and go1's load, 31 s on a loaded machine, else a few) ends before the retries could."""
    address = closed_port()
    r, seconds = library_on(address, tmp_path, "--cluster-timeout", "60")
    refused(r, address, "refused")
    assert seconds < 60


def test_connect_still_reaches_a_real_scheduler():
    distributed = pytest.importorskip("distributed")
    from casadi_delassus.executor import connect
    with distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster, \
            connect(cluster.scheduler_address, timeout_s=10) as client:
        assert client.submit(sum, [1, 2]).result() == 3


# -- 2. a narrower library rerun into the same folder ----------------------------------------
TWO = ["FL_foot:3d", "FR_foot:3d"]


def small_library(out, modes):
    return library("go1", TWO, "pv_osim", modes=modes, out_dir=out, cflags=("-O0",), jobs=1)


def test_narrower_rerun_keeps_the_earlier_modes(tmp_path):
    small_library(tmp_path, [1, 2])
    lib = small_library(tmp_path, [1])
    assert sorted(lib.modes) == [1, 2] and lib.manifest["build"]["built"] == 0
    assert lib(2, Q0).shape == (3, 3) and lib(1, Q0).shape == (3, 3)


def test_concurrent_runs_lose_no_mode(tmp_path):
    code = ("import sys; from casadi_delassus.contact_modes import library; "
            f"library('go1', {TWO!r}, 'pv_osim', modes=[int(sys.argv[1])], out_dir=sys.argv[2], cflags=('-O0',), jobs=1)")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(m), str(tmp_path)], stderr=subprocess.PIPE, text=True)
             for m in (1, 2)]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read()
    manifest = next(tmp_path.rglob("*_modes.json"))
    assert sorted(m["mask"] for m in json.loads(manifest.read_text())["modes"]) == [1, 2]


# -- 3. out= overlapping the input -----------------------------------------------------------
@pytest.fixture(scope="module")
def one_foot(tmp_path_factory):
    """go1 with FL_foot:3d: the function (3 x 3 per q) and a one-mode library of it, at -O0."""
    out = tmp_path_factory.mktemp("one_foot")
    f = cd.generate("go1", ["FL_foot:3d"], "pv_osim", out_dir=out, cflags=("-O0",))
    lib = library("go1", ["FL_foot:3d"], "pv_osim", modes=[1], out_dir=out, cflags=("-O0",), jobs=1)
    return f, lib


def overlapping(n, rng):
    """(Q, D): N x 19 configurations and an N x 3 x 3 output over Q's memory from row 8 on, so
    that instance i's output lands on rows not read yet."""
    go1 = model_for("go1")
    buf = np.empty(n * 19)
    Q = buf.reshape(n, 19)
    Q[:] = [go1.random_q(rng) for _ in range(n)]
    return Q, buf[8 * 19:8 * 19 + n * 9].reshape(n, 3, 3)


@pytest.mark.parametrize("threads", [None, 1, 2])
def test_out_overlapping_q_gives_the_right_results(one_foot, threads):
    f, lib = one_foot
    for call in (lambda Q, D: f(Q, out=D, threads=threads), lambda Q, D: lib(1, Q, out=D, threads=threads)):
        Q, D = overlapping(64, np.random.default_rng(0))
        want = f(Q.copy())
        got = call(Q, D)
        assert got is D and np.array_equal(D, want)


# -- 4. spec offsets -------------------------------------------------------------------------
@pytest.mark.parametrize("spec", ["FL_foot:3d@1e300,1e300,1e300", "FL_foot:3d@1e13,0,0", "FL_foot:3d@1_0,0,0",
                                  "FL_foot:3d-world@0,-2e12,0", "FL_foot|FR_foot:3d@0,0,0;1e300,0,0",
                                  "FL_foot|FR_foot:3d@0,0,1_0"])
def test_spec_offsets_are_range_checked(spec):
    with pytest.raises(ConstraintError) as err:
        constraint_set(model_for("go1"), [spec])
    assert "\n" not in str(err.value) and spec in str(err.value)


def test_spec_offsets_up_to_the_limit_are_taken():
    cs, _ = constraint_set(model_for("go1"), ["FL_foot:3d@1e12,-1e12,0.5"])
    assert cs.m == 3


# -- 5. check's numbers ----------------------------------------------------------------------
@pytest.mark.parametrize("option", [("--samples", "0"), ("--samples", "-3"), ("--tol", "nan"), ("--tol", "-1"),
                                    ("--tol", "inf"), ("--tol", "0")])
def test_check_refuses_meaningless_samples_and_tolerances(tmp_path, option):
    r, _ = run("check", "go1", "-c", "FL_foot:3d", "-a", "pv_osim", "--oracle", "numpy", "--cflags", "-O0",
               "-o", str(tmp_path), *option)
    refused(r, option[0])
    assert not list(tmp_path.iterdir())


# -- 6. --modes values -----------------------------------------------------------------------
def test_modes_value_too_long_for_a_path():
    """Read as a mode, never tried as a file (a name over 255 bytes raised OSError)."""
    assert parse_modes("FL_foot," * 40, FEET) == [1]
    with pytest.raises(ConstraintError) as err:
        parse_modes("x" * 5000, FEET)
    assert "\n" not in str(err.value)


def test_modes_cli_long_value_and_empty_value(tmp_path):
    for value in ("a" * 300, ""):
        r, _ = run("library", "go1", "-s", "4F3", "--modes", value, "-o", str(tmp_path))
        refused(r, "--modes")
        assert not list(tmp_path.iterdir())


def test_modes_file_with_a_huge_mask(tmp_path):
    listed = tmp_path / "modes.txt"
    listed.write_text("1" * 4300 + "\n")
    with pytest.raises(ConstraintError) as err:
        parse_modes(str(listed), FEET)
    assert "\n" not in str(err.value) and len(str(err.value)) < 400


def test_modes_empty_string_is_refused():
    with pytest.raises(ConstraintError, match="no mode"):
        parse_modes("", FEET)
    with pytest.raises(ConstraintError, match="no mode"):
        parse_modes(["0x1", "  "], FEET)


def test_a_file_that_is_no_modes_file_is_not_echoed(tmp_path):
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$s3cr3tHash:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n")
    with pytest.raises(ConstraintError) as err:
        parse_modes(str(secret), FEET)
    assert "s3cr3t" not in str(err.value) and "19000" not in str(err.value) and "shadow:1" in str(err.value)


# -- 7. stray arguments ----------------------------------------------------------------------
def test_extra_positional_inputs_are_refused_for_batches(one_foot):
    f, lib = one_foot
    Q = np.array([Q0, Q0])
    for call in (lambda: f(Q, Q0), lambda: f.outputs(Q, Q0), lambda: lib(1, Q, Q0), lambda: lib(1, Q0, Q0)):
        with pytest.raises(InputError, match="2 positional inputs"):
            call()


def test_threads_must_be_a_count_not_a_bool(one_foot):
    f, lib = one_foot
    Q = np.array([Q0, Q0])
    for threads in (True, False, 1.0, "2"):
        for call in (lambda: f(Q, threads=threads), lambda: lib(1, Q, threads=threads)):
            with pytest.raises(InputError, match="threads"):
                call()


def test_masked_arrays_are_refused(one_foot):
    f, lib = one_foot
    q = np.ma.masked_array(Q0, mask=np.r_[True, np.zeros(18, bool)])
    Q = np.ma.masked_array([Q0, Q0], mask=False)
    for call in (lambda: f(q), lambda: f(Q), lambda: lib(1, q), lambda: lib(1, Q), lambda: f.outputs(q)):
        with pytest.raises(InputError, match="masked"):
            call()


@pytest.mark.parametrize("command", ["count", "generate", "check"])
def test_wrt_without_derivative_is_a_usage_error(tmp_path, command):
    r, _ = run(command, "go1", "-c", "FL_foot:3d", "-a", "pv_osim", "--wrt", "q", *(
        ["-o", str(tmp_path), "--cflags", "-O0"] if command != "count" else []))
    refused(r, "--wrt", "--derivative")


# -- 8. control characters in names ----------------------------------------------------------
FORGED = "evil\r\n[   0.0 s] forged\x1b[2J\u2028x"


def test_printable_escapes_control_characters():
    text = printable(FORGED)
    assert text.isprintable() and "\\r\\n" in text and "\\x1b" in text and "\\u2028" in text
    assert printable("FL_foot ünï ⊕") == "FL_foot ünï ⊕"


def test_progress_lines_and_tables_escape_names(capsys):
    bar = progress.Bar(1, "modes", stream=io.StringIO())
    bar.say(f"{FORGED}: 1 mode")
    bar.advance(f"{FORGED} built")
    progress._say(FORGED)
    err = capsys.readouterr().err
    assert "\r" not in err and "\x1b" not in err and len(err.splitlines()) == 3
    table = report.table([[FORGED, 1]], ["robot", "m"])
    assert len(table.splitlines()) == 3 and "\r" not in table and "\x1b" not in table


LINK = "l1\r\n[   0.0 s] forged\x85\u2028x"


def test_cli_escapes_names_from_a_model(tmp_path):
    """A link named with CR/LF and other line breaks: the tables of `links` and `count` and
    their header lines."""
    urdf = tmp_path / "arm.urdf"
    xml_link = "l1&#13;&#10;[   0.0 s] forged&#133;&#8232;x"
    urdf.write_text(f"""<robot name="arm"><link name="base"><inertial><mass value="2"/>
<inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>
<link name="{xml_link}"><inertial><mass value="1"/><origin xyz="0 0 0.1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
<joint name="j1" type="revolute"><parent link="base"/><child link="{xml_link}"/><axis xyz="0 1 0"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
</robot>""")
    for args in (["links", str(urdf)], ["count", str(urdf), "-c", f"{LINK}:3d", "-a", "naive"],
                 ["count", str(urdf), "-c", f"{LINK}:7d"]):
        r, _ = run(*args)
        out = r.stdout + r.stderr
        assert r.returncode in (0, 2) and "l1" in out
        assert not {"\r", "\x85", "\u2028"} & set(out) and "\n[   0.0 s] forged" not in out, out


# -- 9. the missing-meshes fallback ----------------------------------------------------------
def meshes_text(n):
    assets = "".join(f'<mesh name="m{i}" file="missing{i}.stl"/>' for i in range(n))
    bodies = "".join(f'<body name="b{i}" pos="0 0 0.1"><joint type="hinge"/><geom type="mesh" mesh="m{i}"/>'
                     f'<geom type="sphere" size="0.05"/></body>' for i in range(n))
    return f'<mujoco model="meshes"><asset>{assets}</asset><worldbody>{bodies}</worldbody></mujoco>'


def test_missing_meshes_fallback_costs_about_a_parse(capsys):
    """The fallback compiles the model once more without its meshes: a small multiple of
    MuJoCo's own parse of the text, not a delete per mesh (each of which walks the model)."""
    mujoco = pytest.importorskip("mujoco")
    from casadi_delassus.model.mjcf import compile_mjcf
    text = meshes_text(400)
    t0 = time.perf_counter()
    mujoco.MjSpec.from_string(text)
    parse = time.perf_counter() - t0
    t0 = time.perf_counter()
    model = compile_mjcf(text=text)
    fallback = time.perf_counter() - t0
    assert model.nbody == 401 and np.allclose(model.body_mass[1:], model.body_mass[1])
    assert "without its 400 meshes" in capsys.readouterr().err
    assert fallback < 25 * parse + 0.5, (fallback, parse)


def test_missing_meshes_fallback_matches_the_model_without_them():
    """The same inertias as the model written without the mesh geoms (a geom that fits a
    primitive to a mesh included)."""
    mujoco = pytest.importorskip("mujoco")
    from casadi_delassus.model.mjcf import compile_mjcf
    text = meshes_text(3).replace('<geom type="sphere" size="0.05"/></body>',
                                   '<geom type="sphere" size="0.05"/><geom type="box" mesh="m0" mass="0.3"/></body>', 1)
    plain = mujoco.MjSpec.from_string(text)
    for g in [g for g in plain.geoms if g.meshname]:
        plain.delete(g)
    for m in list(plain.meshes):
        plain.delete(m)
    want = plain.compile()
    got = compile_mjcf(text=text)
    for field in ("body_mass", "body_inertia", "body_ipos", "body_iquat"):
        np.testing.assert_allclose(getattr(got, field), getattr(want, field), rtol=0, atol=1e-15)


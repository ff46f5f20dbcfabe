"""Issue 11, generated artifacts: escaping and identifiers (Security), manifests as data,
data safety of failed and killed runs, cache integrity, --osim names, output folders per
model, thread safety, and the environment (read-only or full output, odd compilers).
Test names start with the issue's section they cover."""
import errno
import json
import os
import pathlib
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from xml.sax.saxutils import quoteattr

import casadi as ca
import numpy as np
import pytest

import casadi_delassus as cd
from casadi_delassus import timing
from casadi_delassus.registry import ALGORITHMS, get_algorithm
from casadi_delassus.verify.check import check_delassus
from casadi_delassus.codegen import escape
from casadi_delassus.runtime import artifact, library
from casadi_delassus.codegen.staging import algorithm_stages
from casadi_delassus.model.registry import is_available
from casadi_delassus.names import ident_part, path_part

from cli_runner import run_cli as run
from conftest import TEST_CFLAGS, TEST_LEVEL

TOL = 1e-10
PAYLOAD = 'x */ __attribute__((constructor)) static void p(void){system("id > MARKER");} /* y'
CC = shutil.which("gcc") or shutil.which("cc")
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler")


def one_line_error(r):
    return r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def payload(marker):
    return PAYLOAD.replace("MARKER", str(marker))


_INERTIAL = ('<inertial><origin xyz="0.1 0 0"/><mass value="{m}"/>'
             '<inertia ixx="0.01" iyy="0.02" izz="0.02" ixy="0" ixz="0" iyz="0"/></inertial>')


def write_urdf(path, links, joints, mass=1.0, robot_name="r"):
    """A serial chain links[0] - joints[0] - links[1] - ... with any names (XML-escaped)."""
    parts = [f"<link name={quoteattr(l)}>{_INERTIAL.format(m=mass)}</link>" for l in links]
    for i, j in enumerate(joints, start=1):
        parts.append(f"<joint type=\"revolute\" name={quoteattr(j)}><parent link={quoteattr(links[i - 1])}/>"
                     f"<child link={quoteattr(links[i])}/><origin xyz=\"0 0 0.1\" rpy=\"0.1 0.2 0\"/>"
                     f"<axis xyz=\"0 {i % 2} {1 - i % 2}\"/><limit lower=\"-3\" upper=\"3\" effort=\"1\" velocity=\"1\"/></joint>")
    path.write_text(f"<robot name={quoteattr(robot_name)}>" + "".join(parts) + "</robot>")
    return path


def small_urdf(path, mass=1.0):
    return write_urdf(path, ["base", "l1", "l2"], ["j1", "j2"], mass)


def code_outside_comments(text):
    """C source without its comments, string and character literals."""
    out, i, n = [], 0, len(text)
    while i < n:
        two = text[i:i + 2]
        if two == "/*":
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif two == "//":
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text[i] in "\"'":
            q, i = text[i], i + 1
            while i < n and text[i] != q:
                i += 2 if text[i] == "\\" else 1
            i += 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def generated_files(*folders):
    return [p for d in folders for p in pathlib.Path(d).rglob("*") if p.is_file() and p.suffix not in (".so", ".o", ".a")
            and p.name != "example" and "CMakeFiles" not in p.parts]


def assert_no_payload_escapes(files, hostile):
    """Each hostile string is inert where it lands: never in C code outside comments and
    literals, never on a non-comment line of a Makefile or CMake file, never raw HTML in
    Markdown outside code spans."""
    for p in files:
        text = p.read_text(errors="replace")
        if p.suffix in (".c", ".h"):
            code = code_outside_comments(text)
            # the payload's words may sit inside an identifier (the robot's readable name): inert there
            assert not re.search(r"\bconstructor\b", code) and not re.search(r"\bsystem\s*\(", code), p
            assert not any(h in text for h in hostile), p      # not even verbatim inside a comment
        elif p.name in ("Makefile", "CMakeLists.txt"):
            for line in text.splitlines():
                if not line.lstrip().startswith("#"):
                    assert "$(shell" not in line and "*/" not in line, (p, line)
        elif p.suffix == ".md":
            prose = re.sub(r"(`+)(?:(?!\1).)+?\1", "", text)           # code spans are literal
            assert not re.search(r"(?<!\\)<(script|img)", prose), p


# -- Security: names are escaped; identifiers are valid and injective ---------------------------------------------

HOSTILE_JOINTS = ["j1 \\", "j2\n#define casadi_real int\n??/", "rob\u00f8t \u202egnp.exe", "k`$(touch pwned)`|#"]


@needs_cc
def test_security_urdf_joint_and_link_payloads_build_load_and_package_without_side_effect(tmp_path):
    """The issue's URDF joint payload (and the same as a link name, a constrained link, and a
    model file name that injects into Makefiles): generate (which loads the .so), cd.load in
    a fresh process, the C package built with make (and CMake) and run: no marker appears,
    and no generated file carries a payload where it means something."""
    marker = tmp_path / "P"
    evil = payload(marker)
    links = ["base", evil, "a.b", "a_b", "<script>alert(1)</script>|`x`"]
    joints = [HOSTILE_JOINTS[0], HOSTILE_JOINTS[1], HOSTILE_JOINTS[2], evil + " joint"]
    urdf = write_urdf(tmp_path / "my robot (v2)\n$(shell touch pwned)\n.urdf", links, joints, robot_name=evil)
    out, pkg = tmp_path / "out", tmp_path / "pkg"
    r = run("generate", urdf, "-c", f"{evil}:6d", "-c", "a.b:6d-input", "-c", "a_b:3d-input", "-a", "naive",
            "-o", out, "--package", pkg)
    assert r.returncode == 0, r.stderr
    manifest = next(out.rglob("naive.json"))
    probe = (f"import casadi_delassus as cd, numpy as np; f = cd.load({str(manifest)!r}); "
             f"print(f.input_names, f(np.r_[0, 0, 0, 0, 0, 0, 1, np.zeros(4)], "
             f"**{{n: np.eye(6)[:int(s)] for n, s in zip(f.input_names[1:], (6, 3))}}).shape)")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "'K_a_b_h" in r.stdout and "'K_a_b'" in r.stdout and "(15, 15)" in r.stdout
    if shutil.which("make"):
        r = subprocess.run(["make", "-s"], cwd=pkg, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert subprocess.run(["./example"], cwd=pkg, capture_output=True).returncode == 0
    if shutil.which("cmake"):
        for cmd in (["cmake", "-S", str(pkg), "-B", str(tmp_path / "build")], ["cmake", "--build", str(tmp_path / "build")]):
            assert subprocess.run(cmd, capture_output=True).returncode == 0
    harness = tmp_path / "harness" / "timing.c"             # the timing harness renders the same names
    harness.parent.mkdir()
    harness.write_text(timing.render_c_harness(json.loads(manifest.read_text())))
    assert subprocess.run([CC, "-fsyntax-only", str(harness)], capture_output=True).returncode == 0
    assert not marker.exists() and not list(tmp_path.rglob("pwned"))
    assert_no_payload_escapes(generated_files(out, pkg, harness.parent), [evil])
    regen = next(l for l in (pkg / "README.md").read_text().splitlines() if l.startswith("casadi-delassus generate"))
    words = shlex.split(regen)                                      # one shell word per argument
    assert words[:2] == ["casadi-delassus", "generate"] and words[3:5] == ["-c", f"{evil}:6d"] and words[-2:] == ["--package", "DIR"]


def _spatial_v2(names):
    rng = np.random.default_rng(3)
    I = []
    for k in range(len(names)):
        Ic, c, m = np.diag([0.02, 0.03, 0.025]) + 0.002, rng.normal(size=3) * 0.05, 1.0 + k
        cx = np.array([[0, -c[2], c[1]], [c[2], 0, -c[0]], [-c[1], c[0], 0]])
        I.append(np.block([[Ic + m * cx @ cx.T, m * cx], [m * cx.T, m * np.eye(3)]]).tolist())
    X = []
    for k in range(len(names)):
        r = np.array([0.1, 0.05 * k, 0.2])
        rx = np.array([[0, -r[2], r[1]], [r[2], 0, -r[0]], [-r[1], r[0], 0]])
        X.append(np.block([[np.eye(3), np.zeros((3, 3))], [-rx, np.eye(3)]]).tolist())
    return {"NB": len(names), "parent": list(range(len(names))), "jtype": ["Rx", "Ry", "Rz"][:len(names)],
            "Xtree": X, "I": I, "bodyNames": names}


@needs_cc
def test_security_spatial_v2_body_name_payload_builds_and_loads_without_side_effect(tmp_path):
    marker = tmp_path / "P"
    evil = payload(marker)
    model = tmp_path / "evil * model (1).json"
    model.write_text(json.dumps(_spatial_v2(["b0", evil, "b2"])))
    out = tmp_path / "out"
    r = run("generate", model, "-c", f"{evil}:6d", "-c", "b2:3d-input", "-a", "naive", "-o", out)
    assert r.returncode == 0, r.stderr
    f = cd.load(next(out.rglob("naive.json")))
    robot = cd.load_robot(str(model))
    assert check_delassus(f, robot, cd.constraint_set(robot, [f"{evil}:6d", "b2:3d-input"])[0], samples=20) <= TOL
    assert not marker.exists()
    assert_no_payload_escapes(generated_files(out), [evil])


@needs_cc
def test_security_sdf_model_name_payload_and_slash_make_no_code_and_no_nested_folder(tmp_path):
    """The robot/model name (SDF <model name>) reaches every generated header; a name with "/"
    and ".." must not create or escape folders either."""
    marker = tmp_path / "P"
    evil = payload(marker) + "/../../escaped"
    link = "<link name='{}'><inertial><mass>1</mass><inertia><ixx>0.1</ixx><iyy>0.1</iyy><izz>0.1</izz></inertia></inertial></link>"
    sdf = tmp_path / "m.sdf"
    sdf.write_text(f'<sdf version="1.6"><model name={quoteattr(evil)}>' + link.format("a") + link.format("b") +
                   "<joint name='j' type='revolute'><parent>a</parent><child>b</child><axis><xyz>0 0 1</xyz></axis></joint>"
                   "</model></sdf>")
    out = tmp_path / "out"
    f = cd.generate(str(sdf), ["b:6d"], "naive", out_dir=out)
    assert cd.load(f.manifest_path)(f.robot.neutral_q()).shape == (6, 6)
    assert f.manifest_path.parent.parent.parent == out and not (tmp_path / "escaped").exists()
    assert [p.name for p in out.iterdir()] == [f.manifest_path.parent.parent.name]
    assert not marker.exists()
    assert_no_payload_escapes(generated_files(out), [evil])


def _random_names(n, seed=0):
    alphabet = list("aZ09_ ./*?\\\"'`$#|<>()-+:;\n\t\x00\x7f") + ["\u00f8", "\u202e", "\u2028", "\U0001f916", "??/", "*/", "/*"]
    rng = np.random.default_rng(seed)
    return ["".join(rng.choice(alphabet, size=rng.integers(0, 12))) for _ in range(n)]


USER_NAMES = ["my robot (v2)", "robot__v2", "_robot", "rob\u00f8t", "a.b", "a_b", "a_b_h0123abcd", "2F+2H", "2F", "2f",
              "", "int", "x" * 200, "K_a", "..", "a/b"]


def test_security_identifiers_are_casadi_valid_and_injective():
    names = list(dict.fromkeys(USER_NAMES + _random_names(3000)))
    parts = [ident_part(n) for n in names]
    assert len(set(parts)) == len(names)                           # never two names on one identifier
    for n, p in zip(names, parts):
        assert ca.Function.check_name(f"cd_{p}") and ca.Function.check_name(f"K_{p}"), (n, p)
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", f"cd_{p}")
        q = path_part(n)
        assert q not in ("", ".", "..") and "/" not in q and not q.startswith((".", "-")), (n, q)
    assert len({path_part(n) for n in names}) == len(names)
    assert [ident_part(n) for n in ("robot_v2", "leg_left_6_link", "2F")] == ["robot_v2", "leg_left_6_link", "2F"]
    assert ident_part("a.b") != "a_b" and ident_part("a_b_h0123abcd") != "a_b_h0123abcd"


@needs_cc
def test_security_escaped_c_comments_and_strings_survive_a_c99_compiler(tmp_path):
    """Every filter output in its context, compiled with trigraphs on (-std=c99): each comment
    stays a comment and each string literal holds exactly the name's UTF-8 bytes."""
    names = USER_NAMES + _random_names(400, seed=1)
    lines = ["#include <stdio.h>"]
    for k, n in enumerate(names):
        lines.append(f"/* {escape.c_comment(n)} */ static const char s{k}[] = {escape.c_string(n)};")
    lines.append("int main(void) {")
    lines += [f'  for (const char* c = s{k}; *c; ++c) {{ printf("%02x", (unsigned char)*c); }}\n  printf("\\n");'
              for k in range(len(names))]
    lines.append("  return 0; }")
    src, exe = tmp_path / "names.c", tmp_path / "names"
    src.write_text("\n".join(lines) + "\n")
    r = subprocess.run([CC, "-std=c99", "-Wall", "-Werror", "-o", str(exe), str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[:2000]
    got = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()
    want = [n.encode("utf-8").split(b"\0")[0].hex() for n in names]   # C strings end at a NUL
    assert got == want


def test_security_text_filters_keep_each_name_on_its_line_and_in_its_context():
    for n in USER_NAMES + _random_names(1000, seed=2):
        for f in (escape.c_comment, escape.line_comment, escape.md, escape.md_code, escape.sh):
            t = f(n)
            assert "\n" not in t and "\r" not in t and "\u2028" not in t, (f.__name__, n)
            trailing = len(t) - len(t.rstrip("\\"))        # a line splice or comment continuation
            assert trailing == 0 or (f is escape.md and trailing % 2 == 0), (f.__name__, n)
        c = escape.c_comment(n)
        assert "*/" not in c and "/*" not in c and "??" not in c
        assert shlex.split(escape.sh(n)) == [escape.visible(n)]
        assert "<" not in escape.md(n).replace("\\<", "")
    with pytest.raises(cd.DelassusError, match="unescaped value"):
        escape.environment("casadi_delassus", "codegen/templates").from_string("{{ x }}").render(x="a")
    with pytest.raises(cd.DelassusError, match="not a C identifier"):
        escape.c_ident("a b")
    with pytest.raises(cd.DelassusError, match="refusing compiler flag"):
        escape.flag("-O2 $(shell id)")


# -- Security / file names users have / specs: identifiers from model, file and spec names -----------------------

@needs_cc
@pytest.mark.parametrize("file_name", ["my robot (v2).urdf", "robot__v2.urdf", "_robot.urdf", "rob\u00f8t.urdf"])
def test_file_names_users_have_generate_and_load(tmp_path, file_name):
    robot_file = small_urdf(tmp_path / file_name)
    f = cd.generate(str(robot_file), ["l2:6d"], "naive", out_dir=tmp_path / "out")
    assert ca.Function.check_name(f.manifest["function"])
    assert f.manifest_path.parent.parent.parent == tmp_path / "out"
    assert check_delassus(f, f.robot, f.constraints, samples=20) <= TOL


@needs_cc
def test_specs_runtime_inputs_on_links_a_dot_b_and_a_underscore_b_get_distinct_names(tmp_path):
    urdf = write_urdf(tmp_path / "ab.urdf", ["base", "a.b", "a_b"], ["j1", "j2"])
    f = cd.generate(str(urdf), ["a.b:6d-input", "a_b:6d-input"], "naive", out_dir=tmp_path / "out")
    assert f.input_names[1:] == [f"K_{ident_part('a.b')}", "K_a_b"] and f.input_names[1] != "K_a_b"
    assert check_delassus(f, f.robot, f.constraints, samples=20) <= TOL


@needs_cc
def test_specs_one_link_as_runtime_input_twice_gets_numbered_names(tmp_path):
    """A link may carry several runtime-input constraints (6d-input and 3d-input, or
    6d-input twice): the second is K_<link>_2; the rows are as for any two constraints."""
    urdf = small_urdf(tmp_path / "two.urdf")
    for specs, names, m in ((["l2:6d-input", "l2:3d-input"], ["K_l2", "K_l2_2"], 9),
                            (["l2:6d-input", "l2:6d-input"], ["K_l2", "K_l2_2"], 12)):
        f = cd.generate(str(urdf), specs, "naive", out_dir=tmp_path / "out")
        assert f.input_names[1:] == names and f.constraints.m == m
        assert check_delassus(f, f.robot, f.constraints, samples=20) <= TOL


def test_specs_runtime_input_names_that_still_meet_are_refused(tmp_path):
    urdf = write_urdf(tmp_path / "clash.urdf", ["base", "foot", "foot_2"], ["j1", "j2"])
    robot = cd.load_robot(str(urdf))
    with pytest.raises(cd.ConstraintError, match="'foot_2:3d-input' would both be named K_foot_2"):
        cd.constraint_set(robot, ["foot:6d-input", "foot:3d-input", "foot_2:3d-input"])


# -- Security: a manifest is data, not code -------------------------------------------------------------------

def _tamper(manifest_path, change, reseal=True):
    m = json.loads(manifest_path.read_text())
    change(m)
    if reseal:                   # an attacker recomputes the manifest's own hash
        m["manifest_sha256"] = artifact.self_hash(m)
    manifest_path.write_text(json.dumps(m))


@pytest.fixture()
def chain(tmp_path):
    """A freshly generated small function in its own folder, and how to regenerate it."""
    out = tmp_path / "out"

    def make(**kw):
        return cd.generate("chain:n=3", None, "naive", out_dir=out, **kw)
    return make(), make


@needs_cc
def test_security_manifest_naming_libc_system_is_never_called(chain):
    f, make = chain
    _tamper(f.manifest_path, lambda m: m.update(function="system"))
    with pytest.raises(cd.ArtifactError, match="names function 'system', not 'cd_chain_n3_default_naive'"):
        cd.load(f.manifest_path)
    with pytest.raises(cd.ArtifactError, match="refusing"):
        cd.load(f.manifest_path, backend="casadi")
    lib, mapped = library.open_library(f.so_path, json.loads(f.manifest_path.read_text())["files"]["so"])
    with pytest.raises(cd.ArtifactError, match="system is not defined by .* refusing to call it"):
        library.own_symbol(lib, mapped, "system")      # ctypes' dlsym finds it through libc
    assert make()(f.robot.neutral_q()).shape == (6, 6)    # generate regenerates


@needs_cc
def test_security_manifest_edited_without_its_hash_is_refused(chain):
    f, _ = chain
    _tamper(f.manifest_path, lambda m: m.update(function="system"), reseal=False)
    with pytest.raises(cd.ArtifactError, match="was modified after it was written"):
        cd.load(f.manifest_path)


# -- Cache integrity ------------------------------------------------------------------------------------------

@needs_cc
def test_cache_integrity_truncated_so_is_refused_then_regenerated(chain, tmp_path):
    f, make = chain
    with open(f.so_path, "r+b") as fh:              # in place, as a full disk or a crash would
        fh.truncate(f.so_path.stat().st_size // 2)
    with pytest.raises(cd.ArtifactError, match=r"naive.so is not the file its manifest records"):
        cd.load(f.manifest_path)
    r = run("generate", "chain:n=3", "-a", "naive", "-o", tmp_path / "out")       # no bus error: regenerated
    assert r.returncode == 0, r.stderr
    g = make()
    assert check_delassus(g, g.robot, g.constraints, samples=20) <= TOL


@needs_cc
def test_cache_integrity_manifest_with_changed_output_shape_is_refused_then_regenerated(chain):
    f, make = chain
    _tamper(f.manifest_path, lambda m: m["outputs"][0].update(shape=[100, 100]))
    with pytest.raises(cd.ArtifactError, match="output 'delassus' is 6 x 6, its manifest says 100 x 100"):
        cd.load(f.manifest_path)
    g = make()                                     # the cache key still matches: generate regenerates
    assert g.manifest["outputs"][0]["shape"] == [6, 6] and g(g.robot.neutral_q()).shape == (6, 6)


@needs_cc
def test_cache_integrity_deleted_header_is_restored(chain):
    f, make = chain
    header = f.manifest_path.with_suffix(".h")
    header.unlink()
    with pytest.raises(cd.ArtifactError, match=r"naive.h is missing"):
        cd.load(f.manifest_path)
    make()
    assert header.is_file() and cd.load(f.manifest_path).manifest["files"]["h"]["bytes"] == header.stat().st_size


@needs_cc
def test_cache_integrity_old_manifest_without_record_regenerates(chain):
    f, make = chain
    _tamper(f.manifest_path, lambda m: [m.pop("files"), m.pop("manifest_sha256")], reseal=False)
    with pytest.raises(cd.ArtifactError, match="has no integrity record"):
        cd.load(f.manifest_path)
    assert "manifest_sha256" in make().manifest


# -- Data safety: failed and killed runs -----------------------------------------------------------------------

def _blocking_compiler(tmp_path, status=1):
    """A fake C compiler: asked to build a shared library, it says it started, waits for the
    file GO (at most 60 s) and exits ``status``; anything else (the -march=native probe) fails at once."""
    started, go = tmp_path / "cc-started", tmp_path / "GO"
    cc = tmp_path / "slow-cc"
    cc.write_text(f"#!/bin/sh\ncase \" $* \" in *' -shared '*) ;; *) exit 1 ;; esac\ntouch '{started}'\n"
                  f"i=0\nwhile [ ! -f '{go}' ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\nexit {status}\n")
    cc.chmod(0o755)
    return cc, started, go


def _wait_for(path, proc, timeout=180):
    t0 = time.time()
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.time() - t0 < timeout, f"{path} never appeared"
        time.sleep(0.05)


def _temp_folders(root):
    return [p for p in pathlib.Path(root).rglob(".tmp-*")]


@needs_cc
def test_data_safety_a_failing_run_keeps_the_files_of_another_run_in_the_same_new_folder(tmp_path):
    """The issue's scenario: a slow failing compile into a fresh -o DIR while
    `generate panda -s EE6 -a naive -o DIR` finishes there; DIR and panda's files survive."""
    if not is_available("panda"):
        pytest.skip("panda (example-robot-data) is not installed")
    cc, started, go = _blocking_compiler(tmp_path)
    out = tmp_path / "DIR"
    slow = subprocess.Popen([sys.executable, "-m", "casadi_delassus", "generate", "go1", "-a", "naive", "-o", str(out),
                             "--cc", str(cc)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(started, slow)
        r = run("generate", "panda", "-s", "EE6", "-a", "naive", "-o", out)
        assert r.returncode == 0, r.stderr
    finally:
        go.touch()
    _, err = slow.communicate(timeout=120)
    assert slow.returncode == 2 and "compiling naive.c failed" in err and "exited with status 1" in err
    kept = out / "panda" / "EE6"
    assert sorted(p.name for p in kept.iterdir()) == ["naive.c", "naive.h", "naive.json", "naive.so"]
    assert cd.load(kept / "naive.json")(cd.load_robot("panda").neutral_q()).shape == (6, 6)
    assert not (out / "go1").exists() and not _temp_folders(out)     # the failed run left nothing of its own


@needs_cc
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_data_safety_killed_generate_leaves_nothing_stale_after_the_next_run(tmp_path, sig):
    """SIGKILL or SIGTERM a real `generate` while it compiles; SIGTERM cleans up at once (exit
    143), SIGKILL cannot, so the next run removes the dead run's temporary folder; its output
    is then correct."""
    cc, started, go = _blocking_compiler(tmp_path)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "casadi_delassus", "generate", "chain:n=3", "-a", "naive", "-o", str(out),
                             "--cc", str(cc)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(started, proc)
        assert len(_temp_folders(out)) == 1
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        go.touch()
    if sig == signal.SIGTERM:
        assert proc.returncode == 128 + signal.SIGTERM and err.strip() == "terminated"
        assert not _temp_folders(out) and not out.exists()
    else:
        assert proc.returncode == -signal.SIGKILL and len(_temp_folders(out)) == 1
    r = run("generate", "chain:n=3", "-a", "naive", "-o", out)
    assert r.returncode == 0, r.stderr
    assert not _temp_folders(out)
    f = cd.load(out / "chain_n3" / "default" / "naive.json")
    robot = cd.load_robot("chain:n=3")
    assert check_delassus(f, robot, cd.constraint_set(robot, "default")[0], samples=20) <= TOL


def test_data_safety_stale_temporary_folders_are_recognised_by_owner_and_age(tmp_path):
    mine = artifact.make_temp(tmp_path, "naive")
    dead = subprocess.Popen(["true"])
    dead.wait()
    host = mine.name.split("-")[1]
    names = {"dead": f".tmp-{host}-{dead.pid}-{int(time.time())}-naive-abc",
             "old": f".tmp-000000-{os.getpid()}-{int(time.time()) - artifact.STALE_AFTER_S - 10}-naive-abc",
             "other host, young": f".tmp-000000-1-{int(time.time())}-naive-abc", "not ours": ".naive-abc"}
    for n in names.values():
        (tmp_path / n).mkdir()
    removed = artifact.clean_stale(tmp_path)
    assert sorted(removed) == sorted([names["dead"], names["old"]])
    assert mine.is_dir() and (tmp_path / names["other host, young"]).is_dir() and (tmp_path / ".naive-abc").is_dir()


# -- --osim names ---------------------------------------------------------------------------------------------

def test_osim_stems_and_function_names_never_collide_with_an_algorithm():
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", a) for a in ALGORITHMS)
    plain_stems = {artifact.stem(a) for a in ALGORITHMS}
    plain_functions = {artifact.function_name("m", "s", a) for a in ALGORITHMS}
    for a in ALGORITHMS:
        assert artifact.stem(a, osim=True) not in plain_stems
        assert artifact.function_name("m", "s", a, osim=True) not in plain_functions
        if get_algorithm(a).inputs:
            for stage, _ in algorithm_stages(a, []):
                assert artifact.stem(a, stage=stage) not in plain_stems


@needs_cc
def test_osim_files_sit_beside_the_algorithm_of_the_same_name(tmp_path):
    out = tmp_path / "out"
    plain = cd.generate("chain:n=3", None, "ltl_osim", out_dir=out)
    with_osim = cd.generate("chain:n=3", None, "ltl_osim", out_dir=out, osim=True)
    assert plain.manifest_path.name == "ltl_osim.json" and with_osim.manifest_path.name == "ltl_osim-osim.json"
    assert list(cd.load(plain.manifest_path).outputs(plain.robot.neutral_q())) == ["delassus"]
    assert list(cd.load(with_osim.manifest_path).outputs(plain.robot.neutral_q())) == ["delassus", "osim"]


def test_osim_on_an_algorithm_without_a_delassus_output_is_one_line_error(tmp_path):
    r = run("generate", "chain:n=3", "-a", "pv", "--osim", "-o", tmp_path)
    assert one_line_error(r) and "--osim needs a Delassus output" in r.stderr and "'pv' outputs vdot, lam" in r.stderr
    assert not list(tmp_path.iterdir())


# -- Output folders unique per model ---------------------------------------------------------------------------

def _arm(path, mass=1.0):
    """A small chain in a file named like the packages name theirs (model.urdf), its robot
    named in <robot name>."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_urdf(path, ["base", "l1", "l2"], ["j1", "j2"], mass, robot_name="tiny_arm")


@needs_cc
def test_output_folders_two_model_files_with_one_name_do_not_share_a_folder(tmp_path):
    """Two files named model.urdf whose <robot name> is one name but whose dynamics differ:
    two folders, each named after the robot (not the file), each its own model's."""
    a = _arm(tmp_path / "anymal_b" / "model.urdf", mass=1.0)
    b = _arm(tmp_path / "anymal_c" / "model.urdf", mass=3.0)
    fa = cd.generate(str(a), ["l2:6d"], "naive", out_dir=tmp_path / "out")
    fb = cd.generate(str(b), ["l2:6d"], "naive", out_dir=tmp_path / "out")
    assert fa.manifest_path.parent != fb.manifest_path.parent
    for f in (fa, fb):                                   # each is still its own model's
        assert f.manifest_path.parent.parent.name.startswith("tiny_arm_h")
        assert re.fullmatch(r"cd_tiny_arm_h[0-9a-f]{8}_custom_[0-9a-f]{8}_naive", f.manifest["function"])
        g = cd.load(f.manifest_path)
        assert check_delassus(g, f.robot, f.constraints, samples=20) <= TOL


def test_model_names_come_from_the_model_content_not_its_path(tmp_path):
    """Moving or copying a model file keeps its generated names (the C API); a model given as
    text with the same content gets them too; the hash changes with what dynamics reads."""
    a = _arm(tmp_path / "one" / "model.urdf")
    moved = tmp_path / "elsewhere" / "robot.urdf"
    moved.parent.mkdir()
    shutil.copy(a, moved)
    names = {artifact.model_name(cd.load_robot(p)) for p in (str(a), str(moved), a.read_text())}
    assert len(names) == 1 and names.pop().startswith("tiny_arm_h")
    assert artifact.model_name(cd.load_robot(str(_arm(tmp_path / "two" / "model.urdf", mass=2.0)))) != \
        artifact.model_name(cd.load_robot(str(a)))


@needs_cc
def test_output_folders_name_option(tmp_path):
    """--name covers the whole C prefix of a custom constraint set (no custom-<hash> part);
    with a named scenario the scenario's name follows it."""
    urdf = small_urdf(tmp_path / "robot.urdf")
    r = run("generate", urdf, "-c", "l2:3d", "-a", "naive", "--name", "my_bot", "-o", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    f = cd.load(next((tmp_path / "out" / "my_bot").rglob("naive.json")))
    assert f.manifest["function"] == "cd_my_bot_naive"
    assert f(cd.load_robot(str(urdf)).neutral_q()).shape == (3, 3)
    g = cd.generate("go1", "4F3", "naive", name="my_dog", out_dir=tmp_path / "out")
    assert g.manifest["function"] == "cd_my_dog_4F3_naive"
    r = run("generate", urdf, "-c", "l2:3d", "-a", "naive", "--name", "my bot", "-o", tmp_path / "out")
    assert one_line_error(r) and "name 'my bot': use letters and digits" in r.stderr


# -- Thread safety ----------------------------------------------------------------------------------------------

@needs_cc
def test_thread_safety_8_threads_for_4_seconds_give_zero_wrong_results(out_dir):
    robot = cd.load_robot("go1") if is_available("go1") else cd.load_robot("chain:n=12,floating=1")
    f = cd.generate(robot, None, "naive", out_dir=out_dir)
    rng = np.random.default_rng(7)
    qs = [[robot.random_q(rng) for _ in range(16)] for _ in range(8)]
    expected = [[f(q) for q in thread_qs] for thread_qs in qs]         # single-threaded
    calls, wrong = [0] * 8, [0] * 8
    stop = time.perf_counter() + 4.0

    def hammer(k):
        i = 0
        while time.perf_counter() < stop:
            j = i % 16
            wrong[k] += not np.array_equal(f(qs[k][j]), expected[k][j])
            calls[k] += 1
            i += 1
    threads = [threading.Thread(target=hammer, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"thread safety: {sum(calls):,} calls from 8 threads in 4 s, {sum(wrong)} wrong")
    assert sum(wrong) == 0 and min(calls) > 100


# -- Environment ------------------------------------------------------------------------------------------------

def _in_mount_namespace(tmp_path, mount_opts, command):
    """Run ``command`` (a shell line, $DIR the mount point) in a private mount namespace on a
    tmpfs mounted with ``mount_opts``; skipped where unprivileged namespaces are unavailable."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode:
        pytest.skip("no unshare -rm here")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    script = f'mount -t tmpfs -o {mount_opts} tmpfs "$DIR" || exit 99\n{command}'
    r = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True,
                       env=dict(os.environ, DIR=str(mnt), PY=sys.executable))
    if r.returncode == 99:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    return r


@needs_cc
def test_environment_read_only_output_folder_is_one_line_error(tmp_path):
    r = _in_mount_namespace(tmp_path, "size=64k,ro", '"$PY" -m casadi_delassus generate chain:n=3 -o "$DIR/out"')
    assert one_line_error(r) and "cannot write to" in r.stderr and "Read-only file system" in r.stderr, r.stderr


@needs_cc
def test_environment_full_output_folder_is_one_line_error_and_leaves_nothing(tmp_path):
    r = _in_mount_namespace(tmp_path, "size=16k", '"$PY" -m casadi_delassus generate go1 -o "$DIR/out"; rc=$?\n'
                                                  'find "$DIR" -mindepth 1; exit $rc')
    assert one_line_error(r) and "No space left on device" in r.stderr, r.stderr
    # nothing but the line saying which base go1 has: not even the folders it made
    assert r.stdout.strip() == f"go1: {cd.load_robot('go1').base_note()}"


@needs_cc
def test_environment_full_disk_simulated_leaves_nothing(tmp_path, monkeypatch):
    original = pathlib.Path.write_text

    def full(self, *a, **kw):
        if self.suffix == ".c":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return original(self, *a, **kw)
    monkeypatch.setattr(pathlib.Path, "write_text", full)
    with pytest.raises(cd.OutputError, match="No space left on device"):
        cd.generate("chain:n=3", None, "naive", out_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_environment_cc_true_writes_no_library_is_a_compiler_error(tmp_path):
    r = run("generate", "chain:n=3", "-a", "naive", "-o", tmp_path / "out", "--cc", "/bin/true")
    assert one_line_error(r) and "exited with status 0 but wrote no naive.so" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_environment_cc_false_gives_a_reason(tmp_path):
    r = run("generate", "chain:n=3", "-a", "naive", "-o", tmp_path / "out", env=dict(os.environ, CC="/bin/false"))
    assert one_line_error(r) and "/bin/false exited with status 1 and printed nothing" in r.stderr, r.stderr


@needs_cc
@pytest.mark.parametrize("command", ["{cc} -pipe", "env {cc}", "ccache {cc}"])
def test_environment_compiler_with_arguments(tmp_path, command):
    """CC="ccache gcc" is normal: a compiler command with arguments is split like a shell does."""
    if command.startswith("ccache") and shutil.which("ccache") is None:
        pytest.skip("ccache is not installed (env gcc is the same case)")
    r = run("generate", "chain:n=3", "-a", "naive", "-o", tmp_path / "out", env=dict(os.environ, CC=command.format(cc=CC)))
    assert r.returncode == 0, r.stderr
    words = shlex.split(command.format(cc=CC))
    manifest = cd.load(tmp_path / "out" / "chain_n3" / "default" / "naive.json").manifest
    assert manifest["compiler"] == shlex.join([shutil.which(words[0]), *words[1:]])


# -- Cache integrity of every compiled kind (issue 31 point 6, issue 35 point 1) -------------------------------
# Each kind is built small, its files damaged one way at a time; then its explicit load by path must refuse with
# one line and the next build must rebuild it (intact files again) and give the first build's values.  A kind runs
# in its own process: before every kind was sealed, a truncated .so was mapped (SIGBUS) and would end the session.

DAMAGES = ("truncated .so", "another valid .so", ".c edited, .so rebuilt by hand", "manifest corrupted",
           "manifest truncated")
DONOR_C = "int cd_donor(void) { return 1; }\n"


def _chain_state():
    """A state of chain:n=3 (q, v, τ) drawn once."""
    rng = np.random.default_rng(3)
    robot = cd.load_robot("chain:n=3")
    return robot, robot.random_q(rng), rng.normal(size=robot.nv), rng.normal(size=robot.nv)


def _function_kind(out):
    robot, q, _, _ = _chain_state()
    f = cd.generate(robot, None, "naive", out_dir=out)
    return f.manifest_path, f.manifest_path, [f(q)], lambda p: cd.load(p)


def _library_kind(out):
    from casadi_delassus.contact_modes import library, load_library
    robot, q, _, _ = _chain_state()
    lib = library(robot, ["link3:3d", "link2:3d"], "naive", modes="0x3", out_dir=out, jobs=1)
    full = lib.function(0x3)
    return lib.manifest_path, full.manifest_path, [lib(0x3, q)], \
        lambda p: [load_library(p).function(0x3), cd.load(full.manifest_path)]


def _open(what):
    """The explicit load of a build_cached kind: its sealed manifest by path (runtime/library.open_sealed)."""
    return lambda p: library.open_sealed(p, ("c", "so"), what)


def _step_kind(out):
    robot, q, v, tau = _chain_state()
    s = cd.contact_step(robot, ["link3:3d-world"], out_dir=out, cflags=TEST_CFLAGS)
    r = s(q, v, 50 * tau, dt=1e-2)
    return s.so.with_suffix(".json"), s.so.with_suffix(".json"), [r.v_next, r.lam], _open("step")


def _rollout_kind(out):
    from casadi_delassus.simulation import simulate as sim
    from casadi_delassus.stepping.rollout import CompiledRollout
    robot, q, _, _ = _chain_state()
    scene = sim.Scene(robot, ["link3@0,0,0.1"])
    scene.height = float(scene.positions(q)[0] @ scene.normal) - 0.1 + 1e-3      # touching at q
    c = CompiledRollout(robot, scene.specs(q), scene._positions, out_dir=out, cflags=TEST_CFLAGS)
    raw = sim.c_rollouts(scene, c, q[None], np.zeros((1, robot.nv)), 20, 1e-3, cd.pd_controller(robot, q, 10.0, 1.0), 1e3)
    return c.so.with_suffix(".json"), c.so.with_suffix(".json"), [raw.Q, raw.FORCES], _open("rollout")


def _mjsoft_kind(out):
    mujoco = pytest.importorskip("mujoco")
    from casadi_delassus import mujoco_contact_step
    from casadi_delassus.mujoco_model.soft_step import mujoco_contacts
    m = mujoco.MjModel.from_xml_string('<mujoco model="ball"><worldbody><geom type="plane" size="5 5 .1"/>'
                                       '<body name="ball" pos="0 0 0.099"><freejoint/>'
                                       '<geom type="sphere" size="0.1" mass="1"/></body></worldbody></mujoco>')
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    s = mujoco_contact_step(m, mujoco_contacts(m, d).specs, out_dir=out, cflags=TEST_CFLAGS)
    r = s.solve(m, d)
    return s.so.with_suffix(".json"), s.so.with_suffix(".json"), [r.force, r.qacc], _open("mjsoft")


def _step_derivatives_kind(out):
    from casadi_delassus.stepping.derivatives import StepDerivatives
    robot, q, v, tau = _chain_state()
    d = StepDerivatives(robot, ["link3:3d-world"], out_dir=out, cflags=TEST_CFLAGS)
    values = [np.array(x) for x in d._f["parts"](q, v, tau, 1e-3, [0.1, -0.2, 3.0])]
    return d.files.with_suffix(".json"), d.files.with_suffix(".json"), values, _open("step_derivatives")


def _cuda_kind(out):
    """The CUDA form with a device library: the host build stands in for nvcc's (none here)."""
    from casadi_delassus.codegen import cuda
    from casadi_delassus.runtime.cuda import CudaFunction
    robot, q, _, _ = _chain_state()
    cuda.find_nvcc = lambda nvcc="auto": "nvcc"
    cuda.device_library = lambda cu, so, *a, **k: cuda.host_library(cu, so) and {"command": "host build"}
    f = cd.generate(robot, None, "naive", out_dir=out, target="cuda")
    host = cuda.host_library(f.manifest_path.with_suffix(".cu"), out / f"host-{len(list(out.glob('host-*')))}.so")
    return f.manifest_path, f.manifest_path, [CudaFunction(f.manifest_path, host_library=host)(q[None])], \
        lambda p: CudaFunction(p)._entry()


ARTIFACT_KINDS = {"function": _function_kind, "library": _library_kind, "step": _step_kind, "rollout": _rollout_kind,
                  "mjsoft": _mjsoft_kind, "step_derivatives": _step_derivatives_kind, "cuda": _cuda_kind}


def _damage(manifest_path, so_owner, damage, donor):
    """Damage one kind's files: ``so_owner``'s .so (the manifest's own, or for a library its mode function's), its
    source (.c, or .cu) with the .so rebuilt from it, or ``manifest_path`` itself."""
    so = so_owner.with_suffix(".so")
    if damage == "truncated .so":
        with open(so, "r+b") as fh:             # in place, as a full disk or a crash would
            fh.truncate(so.stat().st_size // 2)
    elif damage == "another valid .so":
        shutil.copyfile(donor, so)
    elif damage == ".c edited, .so rebuilt by hand":
        source = next(p for p in (manifest_path.with_suffix(".c"), manifest_path.with_suffix(".cu")) if p.is_file())
        source.write_text(source.read_text() + "\n/* edited by hand */\n")
        if source.suffix == ".cu":
            from casadi_delassus.codegen import cuda
            cuda.host_library(source, so)
        elif so_owner == manifest_path:
            subprocess.run([CC, TEST_LEVEL, "-fPIC", "-shared", "-o", str(so), str(source), "-lm", "-pthread"], check=True)
    else:
        data = manifest_path.read_bytes()
        if damage == "manifest corrupted":          # still JSON: the version it names changed
            data = data.replace(b'"version": "', b'"version": "9', 1)
        manifest_path.write_bytes(data[:len(data) // 2] if damage == "manifest truncated" else data)


def damage_every_way(kind, out):
    """Build ``kind`` in ``out``, then per damage: what its explicit load said, whether the next build left intact
    files (artifact.verify) and gave the first build's values.  Run in its own process (see above)."""
    out = pathlib.Path(out)
    donor = out / "donor.so"
    (out / "donor.c").write_text(DONOR_C)
    subprocess.run([CC, "-shared", "-fPIC", "-o", str(donor), str(out / "donor.c")], check=True)
    manifest_path, so_owner, want, load = ARTIFACT_KINDS[kind](out / "a")
    results = {}
    for damage in DAMAGES:
        _damage(manifest_path, so_owner, damage, donor)
        try:
            load(manifest_path)
            said = None
        except cd.ArtifactError as exc:
            said = str(exc)
        except Exception as exc:                 # noqa: BLE001 -- what the old loaders raised
            said = f"{type(exc).__name__} (not an ArtifactError): {exc}"
        _, _, got, _ = ARTIFACT_KINDS[kind](out / "a")
        sealed = json.loads(manifest_path.read_text())
        intact = all(artifact.cached(p, json.loads(p.read_text()).get("hash"), tuple(sealed_kinds(p)), what(p))
                     for p in {manifest_path, so_owner})
        results[damage] = {"said": said, "intact": intact,
                           "equal": all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(got, want)),
                           "artifact": sealed.get("artifact")}
    return results


def sealed_kinds(path):
    """The files a sealed manifest records."""
    return json.loads(path.read_text()).get("files", {}).keys()


def what(path):
    return json.loads(path.read_text()).get("artifact", "function")


@needs_cc
@pytest.mark.parametrize("kind", list(ARTIFACT_KINDS))
def test_cache_integrity_every_compiled_kind_refuses_damage_and_rebuilds(kind, tmp_path):
    """Issue 31 point 6 / issue 35 point 1: for each compiled kind (generated function, contact-mode library,
    contact step, rollout, MuJoCo step, step derivatives, CUDA) a truncated .so, another valid .so, a .c edited with
    the .so rebuilt from it by hand, a corrupted or a truncated manifest: an explicit load by path refuses with one
    line (ArtifactError), and the next build rebuilds (intact sealed files) and gives the first build's values."""
    if kind == "mjsoft":
        pytest.importorskip("mujoco")
    code = f"import json, sys; import runtime.test_artifact as t; print(json.dumps(t.damage_every_way({kind!r}, {str(tmp_path)!r})))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=pathlib.Path(__file__).parents[1], env={**os.environ, "PYTHONPATH": str(pathlib.Path(__file__).parents[1])})
    assert r.returncode == 0, f"the process died (status {r.returncode}): {r.stderr[-800:]}"
    results = json.loads(r.stdout.strip().splitlines()[-1])
    for damage, res in results.items():
        assert res["said"] and "\n" not in res["said"] and "not an ArtifactError" not in res["said"], (damage, res)
        assert res["intact"] and res["equal"] and res["artifact"] == kind, (damage, res)


@needs_cc
def test_cache_integrity_cd_load_names_the_kind_of_another_artifact(tmp_path):
    """cd.load of an intact contact step's manifest: one line saying what it is, not a generated function."""
    path = _step_kind(tmp_path)[0]
    with pytest.raises(cd.ArtifactError, match=r"is the manifest of a contact step, not of a generated function$"):
        cd.load(path)

"""The toolrun script keeps the code ``@dataclass`` compiles in the cache folder: classes made
from kept code must be exactly the classes made by compiling, and the second process must
compile nothing. Each run is a subprocess: the stand-in for ``exec`` is process-wide."""

from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys
from importlib.util import MAGIC_NUMBER
from pathlib import Path

from tests.cli.test_cli_recipe import ROOT
from toolrun.cli.startup import CHECK_SIZE, FILE_FORMAT

# Dataclasses of every kind the generated code differs for, exercised; what they did, as JSON.
EXERCISE = r'''
import dataclasses, json, sys
from dataclasses import InitVar, KW_ONLY, dataclass, field
from typing import ClassVar
if sys.argv[1] == "kept":
    from pathlib import Path
    from toolrun.cli.startup import DataclassCode
    kept = DataclassCode(Path(sys.argv[2]))
    kept.install()

@dataclass
class Plain:
    """x"""
    a: int
    b: str = "b"
    c: list = field(default_factory=list)
    hidden: int = field(default=0, repr=False, compare=False)
    counter: ClassVar[int] = 0

@dataclass(frozen=True, order=True)
class Frozen:
    """x"""
    x: int
    y: tuple = ()

@dataclass(slots=True, kw_only=True)
class Slotted:
    """x"""
    name: str
    size: int = 1

@dataclass(unsafe_hash=True)
class Hashed:
    """x"""
    key: str
    _: KW_ONLY
    flag: bool = False

@dataclass
class WithInit:
    """x"""
    total: int = 0
    extra: InitVar[int] = 0
    def __post_init__(self, extra):
        self.total += extra

out = {}
p = Plain(1)
out["plain"] = [repr(p), p == Plain(1), p == Plain(1, hidden=5), p == Plain(2), dataclasses.asdict(p),
                [f.name for f in dataclasses.fields(p)], repr(dataclasses.replace(p, b="z"))]
f = Frozen(1, (2,))
try:
    f.x = 3
    out["frozen_assign"] = "allowed"
except dataclasses.FrozenInstanceError as exc:
    out["frozen_assign"] = str(exc)
out["frozen"] = [repr(f), hash(f) == hash(Frozen(1, (2,))), Frozen(1) < Frozen(2), sorted([Frozen(3), Frozen(1)]) == [Frozen(1), Frozen(3)]]
s = Slotted(name="n")
out["slotted"] = [repr(s), hasattr(s, "__dict__"), Slotted.__slots__]
try:
    Slotted("positional")
    out["kw_only"] = "accepted"
except TypeError as exc:
    out["kw_only"] = str(exc)
out["hashed"] = [repr(Hashed("k", flag=True)), hash(Hashed("k")) == hash(Hashed("k"))]
out["init_var"] = [repr(WithInit(1, extra=2))]
try:
    Plain()
except TypeError as exc:
    out["missing"] = str(exc)
if sys.argv[1] == "kept":
    out["compiled_now"] = kept.added
    kept.save()
print(json.dumps(out))
'''


def exercise(*args: str) -> dict:
    env = {key: value for key, value in os.environ.items()}
    done = subprocess.run([sys.executable, "-c", EXERCISE, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_classes_made_from_kept_code_are_the_classes_compiling_makes(tmp_path: Path) -> None:
    kept = tmp_path / "dataclass-code.marshal"
    compiled = exercise("plain")
    first = exercise("kept", str(kept))
    second = exercise("kept", str(kept))
    assert first.pop("compiled_now") is True and kept.is_file()
    assert second.pop("compiled_now") is False  # every method came from the file
    assert first == compiled and second == compiled
    assert compiled["frozen_assign"].startswith("cannot assign to field")


def test_a_damaged_file_is_compiled_again(tmp_path: Path) -> None:
    kept = tmp_path / "dataclass-code.marshal"
    kept.write_bytes(b"\x00 not marshal")
    again = exercise("kept", str(kept))
    assert again.pop("compiled_now") is True
    assert again == exercise("plain")


def test_the_script_keeps_the_code_in_the_cache_folder_and_not_when_it_is_off(tmp_path: Path) -> None:
    script = ('import sys; sys.argv = ["toolrun", "schema", "tool"]\n'
              'from toolrun.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass')
    env = {key: value for key, value in os.environ.items()}
    on = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env={**env, "TOOLRUN_CACHE_DIR": str(tmp_path / "on")},
                        capture_output=True, text=True, timeout=60)
    off = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env={**env, "TOOLRUN_CACHE_DIR": "off"},
                         capture_output=True, text=True, timeout=60)
    assert on.returncode == off.returncode == 0 and on.stdout == off.stdout
    assert list((tmp_path / "on").glob(f"dataclass-code-schema-{sys.implementation.cache_tag}-*.marshal"))
    assert not (ROOT / "off").exists()  # "off" is not taken for a folder name


def test_a_file_whose_content_does_not_match_its_check_is_not_used(tmp_path: Path) -> None:
    kept = tmp_path / "dataclass-code.marshal"
    exercise("kept", str(kept))
    data = kept.read_bytes()
    check, codes = data[:CHECK_SIZE], marshal.loads(data[CHECK_SIZE:])
    texts = sorted(codes)
    swapped = {text: codes[texts[(index + 1) % len(texts)]] for index, text in enumerate(texts)}
    kept.write_bytes(check + marshal.dumps(swapped))  # damaged: every text now maps to another's code
    again = exercise("kept", str(kept))
    assert again.pop("compiled_now") is True  # nothing was taken from the damaged file
    assert again == exercise("plain")


def test_a_file_with_one_byte_changed_is_not_used(tmp_path: Path) -> None:
    kept = tmp_path / "dataclass-code.marshal"
    exercise("kept", str(kept))
    data = bytearray(kept.read_bytes())
    data[len(data) // 2] ^= 0x01
    kept.write_bytes(bytes(data))
    again = exercise("kept", str(kept))
    assert again.pop("compiled_now") is True
    assert again == exercise("plain")


def test_each_command_keeps_its_own_dataclass_code_and_the_files_of_before_go(tmp_path: Path) -> None:
    script = ('import sys; sys.argv = ["toolrun", *sys.argv[1:]]\n'
              'from toolrun.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass')
    env = {**os.environ, "TOOLRUN_CACHE_DIR": str(tmp_path)}
    tag = f"{sys.implementation.cache_tag}-{MAGIC_NUMBER.hex()}"
    shared = tmp_path / f"dataclass-code-{tag}.marshal"
    shared.write_bytes(b"written by an earlier toolrun")
    unnumbered = tmp_path / f"dataclass-code-schema-{tag}.marshal"  # one command's, with the digest of before
    unnumbered.write_bytes(b"written by an earlier toolrun")
    for args in (["--color", "never", "schema", "tool"], ["tools", "--help"], ["recipz"]):
        done = subprocess.run([sys.executable, "-c", script, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0 and ("No such command 'recipz'" in done.stderr) == (args == ["recipz"]), done.stderr
    # a mistyped command names no file of its own
    assert sorted(path.name for path in tmp_path.glob("dataclass-code-*")) == [
        f"dataclass-code-{command}-{tag}-{FILE_FORMAT}.marshal" for command in ("other", "schema", "tools")]


# A process that makes one dataclass with the field named argv[3], keeping its code in argv[1]; argv[2]
# is a file of an earlier format.
ONE_FIELD = r'''
import sys
from pathlib import Path
from toolrun.cli.startup import DataclassCode
DataclassCode(Path(sys.argv[1]), (Path(sys.argv[2]),)).install()
from dataclasses import make_dataclass
make_dataclass("C", [(sys.argv[3], int)])
'''


def test_a_file_of_an_earlier_format_goes_when_the_new_file_is_made_and_is_left_alone_after(tmp_path: Path) -> None:
    kept, earlier = tmp_path / "dataclass-code-2.marshal", tmp_path / "dataclass-code.marshal"
    earlier.write_bytes(b"written by an earlier toolrun")
    for field_name in ("first", "second"):  # each compiles new code, so each writes the file
        subprocess.run([sys.executable, "-c", ONE_FIELD, str(kept), str(earlier), field_name], cwd=ROOT, check=True,
                       timeout=60)
        if field_name == "first":
            assert kept.is_file() and not earlier.exists()
            earlier.write_bytes(b"written again by the earlier toolrun, still in use")
    assert earlier.read_bytes() == b"written again by the earlier toolrun, still in use"
    assert len(marshal.loads(kept.read_bytes()[CHECK_SIZE:])) > 1

"""Our decoders' regression tests in sigrok-test's own format (issue 30 item 4).

tests/sigrok/sigrok-test/decoder/test/<pd>/test.conf and their expected .output files,
over captures in the sigrok-dumps layout (tests/sigrok/sigrok-dumps/spi/<chip>/, links to
the bundled captures and their recipes), run by tests/sigrok_test_runner.py with the real
sigrok-cli and the decoders of the package under test. An intended change of output:
``SPIGAP_UPDATE_GOLDEN=1 pytest tests/test_sigrok_test_cases.py`` (pdtest -f), then
review the diff.
"""

from __future__ import annotations

import os

import pytest
import sigrok_test_runner as runner
from conftest import CAPTURES, DECODERS

CASES = [(c, o) for c in runner.all_cases() for o in c.outputs]


@pytest.mark.parametrize("case,out", CASES, ids=[f"{c.id}/{o.type}" for c, o in CASES])
def test_case(case, out):
    problems = runner.check(case, out, fix=bool(os.environ.get("SPIGAP_UPDATE_GOLDEN")), decoders_dir=DECODERS)
    assert not problems, "\n".join(problems)


def test_every_decoder_of_ours_with_device_content_has_cases():
    assert {c.pd for c in runner.all_cases()} == {"ad7606", "mcp2518fd", "mcp3008"}


def test_dumps_are_the_bundled_captures_and_all_used():
    """Each sigrok-dumps file is a bundled capture (with its recipe), each is an input."""
    used = {c.input for c in runner.all_cases()}
    files = {str(p.relative_to(runner.DUMPS_DIR)) for p in runner.DUMPS_DIR.rglob("*.sr")}
    assert used == files
    for rel in files:
        p = runner.DUMPS_DIR / rel
        assert p.resolve().parent == CAPTURES.resolve() and p.resolve().with_suffix(".toml").exists(), rel
        assert (p.parent / "README").exists(), f"{p.parent} has no README (sigrok-dumps keeps one per directory)"


def test_expected_files_are_all_used():
    for pd_dir in runner.TESTS_DIR.iterdir():
        matches = {o.match for c in runner.all_cases() if c.pd == pd_dir.name for o in c.outputs}
        assert {p.name for p in pd_dir.glob("*.output")} == matches, pd_dir.name


@pytest.mark.parametrize("text,ok", [
    ("test a\n\tprotocol-decoder spi channel clk=0 option cpol=1\n\tinput x.sr\n\toutput spi annotation match a.output\n", True),
    ("\n# comment\ntest a\n protocol-decoder spi\n stack spi x\n input x.sr\n output x annotation class c match a.o\n", True),
    ("protocol-decoder spi\ntest a\n", False),                            # test first
    ("test a\n\tprotocol-decoder spi channel clk\n\tinput x\n\toutput x annotation match a\n", False),
    ("test a\n\tprotocol-decoder spi bogus clk=0\n\tinput x\n\toutput x annotation match a\n", False),
    ("test a\n\tprotocol-decoder spi\n\tinput x\n", False),                # no output
    ("test a\n\tprotocol-decoder spi\n\tinput x\n\toutput x annotation\n", False),   # no match
    ("test a b\n", False),
])
def test_grammar(tmp_path, text, ok):
    """pdtest's parse_testfile rules: 'test' first, key=value pairs after channel/option,
    every case with protocol-decoder, input and output ... match."""
    conf = tmp_path / "test.conf"
    conf.write_text(text)
    if ok:
        assert runner.parse_testfile(conf, "x")
    else:
        with pytest.raises(runner.TestConfError):
            runner.parse_testfile(conf, "x")

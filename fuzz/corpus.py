"""The regression corpus: every case a fuzzing run ever found, as the frame it sent.

Files are ``fuzz/corpus/<api>-v<version>-<label>-<seed>.bin``, each one whole request frame
(size prefix, header, body). ``tests/unit/protocol/test_fuzz_corpus.py`` decodes every file
in process and ``tests/integration/test_fuzz_live.py`` sends them to a live broker.
"""

from __future__ import annotations

from pathlib import Path

from fuzz.cases import Case

CORPUS = Path(__file__).parent / "corpus"


def save(case: Case, label: str) -> Path:
    CORPUS.mkdir(exist_ok=True)
    path = CORPUS / (f"{case.target.name}-v{case.target.version}-{label}-{case.seed}.bin")
    path.write_bytes(case.frame(1))
    return path


def load() -> list[tuple[str, bytes]]:
    """(file name, frame) of every corpus entry, sorted by name."""
    if not CORPUS.is_dir():
        return []
    return [(p.name, p.read_bytes()) for p in sorted(CORPUS.glob("*.bin"))]

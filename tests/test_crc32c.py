"""CRC32C (Castagnoli) in C: known vectors, both code paths, chaining."""
import os
import random

import pytest

from kreplica.records import crc32c, crc32c_backend, crc32c_hw, crc32c_hw_lanes, crc32c_sw

# RFC 3720 (iSCSI) appendix B.4 and the common "check" value.
VECTORS = [
    (b"", 0x00000000),
    (b"123456789", 0xE3069283),
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
]


def _paths():
    paths = [crc32c, crc32c_sw]
    if crc32c_backend() == "sse4.2":
        # crc32c_hw folds with AVX-512 where the CPU can; the lanes are what others run
        paths += [crc32c_hw, crc32c_hw_lanes]
    return paths


@pytest.mark.parametrize("data,expected", VECTORS)
def test_known_vectors_on_every_path(data, expected):
    for fn in _paths():
        assert fn(data) == expected, fn.__name__


def test_backend_matches_the_cpu():
    flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    expected = "sse4.2" if " sse4_2" in flags else "table"
    assert crc32c_backend() == expected
    if expected == "table":
        with pytest.raises(RuntimeError):
            crc32c_hw(b"x")
        with pytest.raises(RuntimeError):
            crc32c_hw_lanes(b"x")


def test_paths_agree_on_random_data_of_every_shape():
    rng = random.Random(7)
    blob = rng.randbytes(200_000)
    # lengths cross the 8-byte word, the 3x256 short lane, the 3x8192 long lane and the
    # folding path's 256-byte start, 256-byte steps, 64-byte and 16-byte tails
    lengths = [0, 1, 7, 8, 9, 255, 256, 257, 271, 319, 320, 335, 511, 512, 513, 767, 768, 769,
               24575, 24576, 24577, 100_000, 199_000] + [rng.randrange(256, 5000) for _ in range(200)]
    for n in lengths:
        start = rng.randrange(0, 64)
        data = memoryview(blob)[start:start + n]
        expected = crc32c_sw(data)
        for fn in _paths():
            assert fn(data) == expected, (fn.__name__, n, start)


def test_chaining_equals_one_pass():
    rng = random.Random(3)
    a, b = rng.randbytes(10_001), rng.randbytes(30_003)
    for fn in _paths():
        assert fn(b, fn(a)) == fn(a + b)


def test_accepts_any_buffer():
    data = b"123456789"
    assert crc32c(bytearray(data)) == crc32c(memoryview(data)) == 0xE3069283
    with pytest.raises(TypeError):
        crc32c("123456789")

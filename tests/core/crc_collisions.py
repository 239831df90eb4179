"""Names with one CRC-32, made as an attacker would: CRC-32 is affine over GF(2), so for names of one length
the CRC is a fixed linear function of which letters are swapped, and every combination of swaps in the
kernel of that function keeps the CRC. 48 swappable positions give 2**16 names in milliseconds."""

from __future__ import annotations

from zlib import crc32


def same_crc32_names(count: int, prefix: str = "flood-", positions: int = 48) -> list[str]:
    """``count`` distinct valid DNS labels (``prefix`` then ``positions`` letters a/b) with one CRC-32."""
    base = bytearray((prefix + "a" * positions).encode())
    start = len(prefix)
    base_crc = crc32(base)

    def flipped_crc(position: int) -> int:
        name = bytearray(base)
        name[start + position] = ord("b")
        return crc32(name) ^ base_crc

    # Gaussian elimination over GF(2), tracking which swaps each reduced vector combines.
    pivots: dict[int, tuple[int, int]] = {}  # leading bit -> (vector, swaps)
    kernel: list[int] = []
    for position in range(positions):
        vector, swaps = flipped_crc(position), 1 << position
        while vector:
            top = vector.bit_length() - 1
            if top not in pivots:
                pivots[top] = (vector, swaps)
                break
            pivot_vector, pivot_swaps = pivots[top]
            vector, swaps = vector ^ pivot_vector, swaps ^ pivot_swaps
        if not vector:
            kernel.append(swaps)
    if count > 1 << len(kernel):
        raise ValueError(f"{positions} positions give at most {1 << len(kernel)} names")
    names = []
    for combination in range(count):
        swaps = 0
        for i, basis in enumerate(kernel):
            if combination >> i & 1:
                swaps ^= basis
        name = bytearray(base)
        for position in range(positions):
            if swaps >> position & 1:
                name[start + position] = ord("b")
        names.append(name.decode())
    assert len({crc32(n.encode()) for n in names}) == 1
    return names

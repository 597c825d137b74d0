"""Binary files given as text data: compressed, archived, or data of another kind under
the wrong name, recognised by their first bytes and named in the error."""
from __future__ import annotations

from ..errors import DataError

_MAGIC = ((b"\x1f\x8b", "is gzip-compressed: decompress it first (gunzip)"),
          (b"\xfd7zXZ\x00", "is xz-compressed: decompress it first (unxz)"),
          (b"\x28\xb5\x2f\xfd", "is zstd-compressed: decompress it first (unzstd)"),
          (b"PK\x03\x04", "is a ZIP archive (an Excel .xlsx workbook?): unpack it, or save the sheet as CSV"),
          (b"\x89HDF\r\n\x1a\n", "is an HDF5 file: name it .h5 or .hdf5 (its dataset: --dataset NAME)"),
          (b"\x93NUMPY", "is a numpy .npy array: name it .npy"))


def refuse_binary(raw: bytes, path: str) -> None:
    """A compressed, archived or binary data file read as text: say what it is (its bytes
    would otherwise be blamed on the text encoding)."""
    for magic, what in _MAGIC:
        if raw.startswith(magic):
            raise DataError(f"{path}: {what}; text data is read as plain CSV/TSV")
    if raw.startswith(b"BZh") and raw[4:10] == b"1AY&SY":
        raise DataError(f"{path}: is bzip2-compressed: decompress it first (bunzip2); text data is read as plain "
                        "CSV/TSV")
    if len(raw) >= 8 and raw.startswith(b"PAR1") and raw.endswith(b"PAR1"):
        raise DataError(f"{path}: is a Parquet file: name it .parquet")

"""The one error hierarchy of henn. Every message says what to do about it."""


class HennError(Exception):
    """Base class of every error henn raises on purpose."""


class ParameterError(HennError):
    """Invalid, inconsistent or insecure encryption parameters."""


class SecurityError(ParameterError):
    """Parameters below 128-bit security that were not requested through an insecure_ preset."""


class LevelError(HennError):
    """Level mismatch between operands, or multiplicative depth exhausted."""


class ScaleError(HennError):
    """Operands whose scales differ where they must match."""


class MissingKeyError(HennError):
    """A key needed by an operation (relinearization, rotation, conjugation) is missing."""


class UnsupportedOperation(HennError):
    """An operation, layer or feature the chosen backend or compiler does not support."""


class BackendError(HennError):
    """A backend is not installed, failed to load, or reported an internal failure."""


class InputError(HennError):
    """Bad user input: wrong shape or length, NaN/inf, values out of range."""


class SerializationError(InputError):
    """Truncated, corrupted or foreign serialized data."""


class KeyFileError(InputError):
    """A key file that cannot be opened: not one, damaged, changed, or a wrong passphrase."""


class TooLargeError(InputError):
    """A request or upload larger than the model or the server's limits allow."""


class OrderError(InputError):
    """A request out of its protocol's order (a client-aided segment before the one it follows): HTTP 409."""


class SessionError(InputError):
    """An unknown or expired inference session: create a new one (upload the evaluation keys again)."""


class BusyError(HennError):
    """The server's queue is full: retry later."""


class CapacityError(HennError):
    """The server cannot take this now (memory budget or session count): retry later or elsewhere."""

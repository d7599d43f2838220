"""NVIDIA RM status codes: names and messages.

The names and values are the generated `NV_STATUS` enum (nvstatus.h, `generated.nv.rm_580`). The
messages are the third argument of nvstatuscodes.h's `NV_STATUS_CODE(name, code, string)` list,
which the bindings do not carry: nvstatus.h turns that list into an enum with a macro whose body is
a statement (bindgen reports `NV_STATUS_CODE: statement body`), so the strings never reach the IR.
They are copied below from open-gpu-kernel-modules 580.142, src/common/sdk/nvidia/inc/
nvstatuscodes.h.
"""
from __future__ import annotations

from functools import lru_cache

from generated.nv import rm_580 as rm

# nvstatuscodes.h (580.142): status name -> message.
_MESSAGES: dict[str, str] = {
    'NV_OK': 'Success',
    'NV_ERR_GENERIC': 'Failure: Generic Error',
    'NV_ERR_BROKEN_FB': 'Frame-Buffer broken',
    'NV_ERR_BUFFER_TOO_SMALL': 'Buffer passed in is too small',
    'NV_ERR_BUSY_RETRY': 'System is busy, retry later',
    'NV_ERR_CALLBACK_NOT_SCHEDULED': 'The requested callback API not scheduled',
    'NV_ERR_CARD_NOT_PRESENT': 'Card not detected',
    'NV_ERR_CYCLE_DETECTED': 'Call cycle detected',
    'NV_ERR_DMA_IN_USE': 'Requested DMA is in use',
    'NV_ERR_DMA_MEM_NOT_LOCKED': 'Requested DMA memory is not locked',
    'NV_ERR_DMA_MEM_NOT_UNLOCKED': 'Requested DMA memory is not unlocked',
    'NV_ERR_DUAL_LINK_INUSE': 'Dual-Link is in use',
    'NV_ERR_ECC_ERROR': 'Generic ECC error',
    'NV_ERR_FIFO_BAD_ACCESS': 'FIFO: Invalid access',
    'NV_ERR_FREQ_NOT_SUPPORTED': 'Requested frequency is not supported',
    'NV_ERR_GPU_DMA_NOT_INITIALIZED': 'Requested DMA not initialized',
    'NV_ERR_GPU_IS_LOST': 'GPU lost from the bus',
    'NV_ERR_GPU_IN_FULLCHIP_RESET': 'GPU currently in full-chip reset',
    'NV_ERR_GPU_NOT_FULL_POWER': 'GPU not in full power',
    'NV_ERR_GPU_UUID_NOT_FOUND': 'GPU UUID not found',
    'NV_ERR_HOT_SWITCH': 'System in hot switch',
    'NV_ERR_I2C_ERROR': 'I2C Error',
    'NV_ERR_I2C_SPEED_TOO_HIGH': 'I2C Error: Speed too high',
    'NV_ERR_ILLEGAL_ACTION': 'Current action is not allowed',
    'NV_ERR_IN_USE': 'Generic busy error',
    'NV_ERR_INFLATE_COMPRESSED_DATA_FAILED': 'Failed to inflate compressed data',
    'NV_ERR_INSERT_DUPLICATE_NAME': 'Found a duplicate entry in the requested btree',
    'NV_ERR_INSUFFICIENT_RESOURCES': 'Ran out of a critical resource, other than memory',
    'NV_ERR_INSUFFICIENT_PERMISSIONS': 'The requester does not have sufficient permissions',
    'NV_ERR_INSUFFICIENT_POWER': 'Generic Error: Low power',
    'NV_ERR_INVALID_ACCESS_TYPE': 'This type of access is not allowed',
    'NV_ERR_INVALID_ADDRESS': 'Address not valid',
    'NV_ERR_INVALID_ARGUMENT': 'Invalid argument to call',
    'NV_ERR_INVALID_BASE': 'Invalid base',
    'NV_ERR_INVALID_CHANNEL': 'Given channel-id not valid',
    'NV_ERR_INVALID_CLASS': 'Given class-id not valid',
    'NV_ERR_INVALID_CLIENT': 'Given client not valid',
    'NV_ERR_INVALID_COMMAND': 'Command passed is not valid',
    'NV_ERR_INVALID_DATA': 'Invalid data passed',
    'NV_ERR_INVALID_DEVICE': 'Current device is not valid',
    'NV_ERR_INVALID_DMA_SPECIFIER': 'The requested DMA specifier is not valid',
    'NV_ERR_INVALID_EVENT': 'Invalid event occurred',
    'NV_ERR_INVALID_FLAGS': 'Invalid flags passed',
    'NV_ERR_INVALID_FUNCTION': 'Called function is not valid',
    'NV_ERR_INVALID_HEAP': 'Heap corrupted',
    'NV_ERR_INVALID_INDEX': 'Index invalid',
    'NV_ERR_INVALID_IRQ_LEVEL': 'Requested IRQ level is not valid',
    'NV_ERR_INVALID_LIMIT': 'Generic Error: Invalid limit',
    'NV_ERR_INVALID_LOCK_STATE': 'Requested lock state not valid',
    'NV_ERR_INVALID_METHOD': 'Requested method not valid',
    'NV_ERR_INVALID_OBJECT': 'Object not valid',
    'NV_ERR_INVALID_OBJECT_BUFFER': 'Object buffer passed is not valid',
    'NV_ERR_INVALID_OBJECT_HANDLE': 'Object handle is not valid',
    'NV_ERR_INVALID_OBJECT_NEW': 'New object is not valid',
    'NV_ERR_INVALID_OBJECT_OLD': 'Old object is not valid',
    'NV_ERR_INVALID_OBJECT_PARENT': 'Object parent is not valid',
    'NV_ERR_INVALID_OFFSET': 'The offset passed is not valid',
    'NV_ERR_INVALID_OPERATION': 'Requested operation is not valid',
    'NV_ERR_INVALID_OWNER': 'Owner not valid',
    'NV_ERR_INVALID_PARAM_STRUCT': 'Invalid structure parameter',
    'NV_ERR_INVALID_PARAMETER': 'At least one of the parameters passed is not valid',
    'NV_ERR_INVALID_PATH': 'The requested path is not valid',
    'NV_ERR_INVALID_POINTER': 'Pointer not valid',
    'NV_ERR_INVALID_REGISTRY_KEY': 'Found an invalid registry key',
    'NV_ERR_INVALID_REQUEST': 'Generic Error: Invalid request',
    'NV_ERR_INVALID_STATE': 'Generic Error: Invalid state',
    'NV_ERR_INVALID_STRING_LENGTH': 'The string length is not valid',
    'NV_ERR_INVALID_READ': 'The requested read operation is not valid',
    'NV_ERR_INVALID_WRITE': 'The requested write operation is not valid',
    'NV_ERR_INVALID_XLATE': 'The requested translate operation is not valid',
    'NV_ERR_IRQ_NOT_FIRING': 'Requested IRQ is not firing',
    'NV_ERR_IRQ_EDGE_TRIGGERED': 'IRQ is edge triggered',
    'NV_ERR_MEMORY_TRAINING_FAILED': 'Failed memory training sequence',
    'NV_ERR_MISMATCHED_SLAVE': 'Slave mismatch',
    'NV_ERR_MISMATCHED_TARGET': 'Target mismatch',
    'NV_ERR_MISSING_TABLE_ENTRY': 'Requested entry missing not found in the table',
    'NV_ERR_MODULE_LOAD_FAILED': 'Failed to load the requested module',
    'NV_ERR_MORE_DATA_AVAILABLE': 'There is more data available',
    'NV_ERR_MORE_PROCESSING_REQUIRED': 'More processing required for the given call',
    'NV_ERR_MULTIPLE_MEMORY_TYPES': 'Multiple memory types found',
    'NV_ERR_NO_FREE_FIFOS': 'No more free FIFOs found',
    'NV_ERR_NO_INTR_PENDING': 'No interrupt pending',
    'NV_ERR_NO_MEMORY': 'Out of memory',
    'NV_ERR_NO_SUCH_DOMAIN': 'Requested domain does not exist',
    'NV_ERR_NO_VALID_PATH': 'Caller did not specify a valid path',
    'NV_ERR_NOT_COMPATIBLE': 'Generic Error: Incompatible types',
    'NV_ERR_NOT_READY': 'Generic Error: Not ready',
    'NV_ERR_NOT_SUPPORTED': 'Call not supported',
    'NV_ERR_OBJECT_NOT_FOUND': 'Requested object not found',
    'NV_ERR_OBJECT_TYPE_MISMATCH': 'Specified objects do not match',
    'NV_ERR_OPERATING_SYSTEM': 'Generic operating system error',
    'NV_ERR_OTHER_DEVICE_FOUND': 'Found other device instead of the requested one',
    'NV_ERR_OUT_OF_RANGE': 'The specified value is out of bounds',
    'NV_ERR_OVERLAPPING_UVM_COMMIT': 'Overlapping unified virtual memory commit',
    'NV_ERR_PAGE_TABLE_NOT_AVAIL': 'Requested page table not available',
    'NV_ERR_PID_NOT_FOUND': 'Process-Id not found',
    'NV_ERR_PROTECTION_FAULT': 'Protection fault',
    'NV_ERR_RC_ERROR': 'Generic RC error',
    'NV_ERR_REJECTED_VBIOS': 'Given Video BIOS rejected/invalid',
    'NV_ERR_RESET_REQUIRED': 'Reset required',
    'NV_ERR_STATE_IN_USE': 'State in use',
    'NV_ERR_SIGNAL_PENDING': 'Signal pending',
    'NV_ERR_TIMEOUT': 'Call timed out',
    'NV_ERR_TIMEOUT_RETRY': 'Call timed out, please retry later',
    'NV_ERR_TOO_MANY_PRIMARIES': 'Too many primaries',
    'NV_ERR_UVM_ADDRESS_IN_USE': 'Unified virtual memory requested address already in use',
    'NV_ERR_MAX_SESSION_LIMIT_REACHED': 'Maximum number of sessions reached',
    'NV_ERR_LIB_RM_VERSION_MISMATCH': "Library version doesn't match driver version",
    'NV_ERR_PRIV_SEC_VIOLATION': 'Priv security violation',
    'NV_ERR_GPU_IN_DEBUG_MODE': 'GPU currently in debug mode',
    'NV_ERR_FEATURE_NOT_ENABLED': 'Requested Feature functionality is not enabled',
    'NV_ERR_RESOURCE_LOST': 'Requested resource has been destroyed',
    'NV_ERR_PMU_NOT_READY': 'PMU is not ready or has not yet been initialized',
    'NV_ERR_FLCN_ERROR': 'Generic falcon assert or halt',
    'NV_ERR_FATAL_ERROR': 'Fatal/unrecoverable error',
    'NV_ERR_MEMORY_ERROR': 'Generic memory error',
    'NV_ERR_INVALID_LICENSE': 'License provided is rejected or invalid',
    'NV_ERR_NVLINK_INIT_ERROR': 'Nvlink Init Error',
    'NV_ERR_NVLINK_MINION_ERROR': 'Nvlink Minion Error',
    'NV_ERR_NVLINK_CLOCK_ERROR': 'Nvlink Clock Error',
    'NV_ERR_NVLINK_TRAINING_ERROR': 'Nvlink Training Error',
    'NV_ERR_NVLINK_CONFIGURATION_ERROR': 'Nvlink Configuration Error',
    'NV_ERR_RISCV_ERROR': 'Generic RISC-V assert or halt',
    'NV_ERR_FABRIC_MANAGER_NOT_PRESENT': 'Fabric Manager is not loaded',
    'NV_ERR_ALREADY_SIGNALLED': 'Semaphore Surface value already >= requested wait value',
    'NV_ERR_QUEUE_TASK_SLOT_NOT_AVAILABLE':
        'PMU RPC error due to no queue slot available for this event',
    'NV_ERR_KEY_ROTATION_IN_PROGRESS': 'Operation not allowed as key rotation is in progress',
    'NV_ERR_TEST_ONLY_CODE_NOT_ENABLED': 'Test-only code path not enabled',
    'NV_ERR_SECURE_BOOT_FAILED': 'GFW secure boot failed',
    'NV_ERR_INSUFFICIENT_ZBC_ENTRY': 'No more ZBC entry for the client',
    'NV_ERR_NVLINK_FABRIC_NOT_READY':
        'Nvlink Fabric Status or Fabric Probe is not yet complete, caller needs to retry',
    'NV_ERR_NVLINK_FABRIC_FAILURE': 'Nvlink Fabric Probe failed',
    'NV_ERR_GPU_MEMORY_ONLINING_FAILURE': 'GPU Memory Onlining failed',
    'NV_ERR_REDUCTION_MANAGER_NOT_AVAILABLE': 'Reduction Manager is not available',
    'NV_ERR_THRESHOLD_CROSSED': 'A fatal threshold has been crossed',
    'NV_ERR_RESOURCE_RETIREMENT_ERROR': 'An error occurred while trying to retire a resource',
    'NV_ERR_FABRIC_STATE_OUT_OF_SYNC': 'NVLink fabric state cached by the driver is out of sync',
    'NV_ERR_BUFFER_FULL': 'Buffer is full',
    'NV_ERR_BUFFER_EMPTY': 'Buffer is empty',
    'NV_ERR_MC_FLA_OFFSET_TABLE_FULL': 'Multicast FLA offset table has no available slots',
    'NV_ERR_DMA_XFER_FAILED': 'DMA transfer failed',
    'NV_WARN_HOT_SWITCH': 'WARNING Hot switch',
    'NV_WARN_INCORRECT_PERFMON_DATA': 'WARNING Incorrect performance monitor data',
    'NV_WARN_MISMATCHED_SLAVE': 'WARNING Slave mismatch',
    'NV_WARN_MISMATCHED_TARGET': 'WARNING Target mismatch',
    'NV_WARN_MORE_PROCESSING_REQUIRED': 'WARNING More processing required for the call',
    'NV_WARN_NOTHING_TO_DO': 'WARNING Nothing to do',
    'NV_WARN_NULL_OBJECT': 'WARNING NULL object found',
    'NV_WARN_OUT_OF_RANGE': 'WARNING value out of range',
    'NV_WARN_THRESHOLD_CROSSED': 'WARNING Threshold has been crossed',
}


@lru_cache(maxsize=1)
def _names() -> dict[int, str]:
    """Status value -> name, from the generated enum (the NV_OK/NV_ERR_*/NV_WARN_* constants)."""
    out: dict[int, str] = {}
    for name in _MESSAGES:
        value = getattr(rm, name, None)
        if isinstance(value, int):
            out.setdefault(value, name)
    return out


def status_name(status: int) -> str:
    """"NV_ERR_INVALID_ARGUMENT" for 0x1f; "NV_STATUS_0x..." for a value no header names."""
    return _names().get(status, f"NV_STATUS_{status:#010x}")


def status_message(status: int) -> str:
    """The header's message for `status` ("Invalid argument"), or "" when it has none."""
    return _MESSAGES.get(_names().get(status, ""), "")


def describe_status(status: int) -> str:
    """"NV_ERR_INVALID_ARGUMENT (0x1f): Invalid argument"."""
    msg = status_message(status)
    return f"{status_name(status)} ({status:#x})" + (f": {msg}" if msg else "")

/*
 * A stand-in for libnvidia-ml.so.1, so that the real nvidia-ml-py binding can be exercised on
 * machines without an NVIDIA driver. The signatures are those of nvml.h; handles are opaque
 * pointers, as in the real library.
 *
 * The GPUs' state is a plain `key=value` file named by $NVML_STUB_STATE, read again at every
 * call, so a test can change it while a source runs. Without that variable (or file) the stub
 * answers like a host whose driver is not loaded, so a stub left loaded in a test process never
 * produces GPU values for another test by accident.
 *
 *   init=ok | driver_not_loaded | unknown      what nvmlInit answers (default ok)
 *   driver_version=550.54.15
 *   gpus=2                                     how many GPUs there are (default 1)
 *   gpu0.name=... gpu0.uuid=...
 *   gpu0.memory_total=... gpu0.memory_used=... (bytes)
 *   gpu0.utilization_gpu=... gpu0.utilization_memory=... (percent)
 *   gpu0.temperature=... (C)  gpu0.power=... gpu0.power_limit=... (mW)
 *   gpu0.clock_reasons=0x44                    the clock event (throttle) reasons bitmask
 *   gpu0.ecc=...                               volatile uncorrected ECC errors
 *   gpu0.xids=79,48                            every XID this GPU ever raised, oldest first;
 *                                              events reach an event set only for XIDs appended
 *                                              after the GPU was registered with it
 *
 * Any numeric value may instead be `unsupported` (NVML_ERROR_NOT_SUPPORTED), `gpu_lost`
 * (NVML_ERROR_GPU_IS_LOST) or `unknown` (NVML_ERROR_UNKNOWN); `gpu0.xids=unsupported` makes
 * event registration unsupported on that GPU.
 *
 * Build variants: -DOMIT_ECC leaves nvmlDeviceGetTotalEccErrors out of the library and
 * -DOMIT_CLOCK_EVENTS leaves out nvmlDeviceGetCurrentClocksEventReasons (drivers before 535
 * only have the older ...ThrottleReasons name), so the binding's own symbol lookup fails.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum nvmlReturn_enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_UNKNOWN = 999,
} nvmlReturn_t;

typedef enum nvmlTemperatureSensors_enum { NVML_TEMPERATURE_GPU = 0 } nvmlTemperatureSensors_t;
typedef enum nvmlMemoryErrorType_enum {
    NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1,
} nvmlMemoryErrorType_t;
typedef enum nvmlEccCounterType_enum {
    NVML_VOLATILE_ECC = 0,
    NVML_AGGREGATE_ECC = 1,
} nvmlEccCounterType_t;

#define MAX_GPUS 16
#define MAX_XIDS 64
#define nvmlEventTypeXidCriticalError 0x8ULL

struct nvmlDevice_st {
    unsigned int index;
};
typedef struct nvmlDevice_st *nvmlDevice_t;

struct nvmlEventSet_st {
    int registered[MAX_GPUS];
    size_t delivered[MAX_GPUS]; /* XIDs of the GPU's list already handed out */
};
typedef struct nvmlEventSet_st *nvmlEventSet_t;

typedef struct {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

typedef struct {
    unsigned int gpu;
    unsigned int memory;
} nvmlUtilization_t;

typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlEventData_t;

static struct nvmlDevice_st devices[MAX_GPUS];
static int init_count = 0;

/* Copies the value of `key` from the state file into `out`; returns 1 when found. */
static int lookup(const char *key, char *out, size_t size) {
    const char *path = getenv("NVML_STUB_STATE");
    if (path == NULL) return 0;
    FILE *file = fopen(path, "r");
    if (file == NULL) return 0;
    char line[512];
    size_t key_len = strlen(key);
    int found = 0;
    while (fgets(line, sizeof line, file) != NULL) {
        if (strncmp(line, key, key_len) == 0 && line[key_len] == '=') {
            char *value = line + key_len + 1;
            value[strcspn(value, "\r\n")] = '\0';
            snprintf(out, size, "%s", value);
            found = 1; /* the last assignment wins, as in a shell file */
        }
    }
    fclose(file);
    return found;
}

static int have_state(void) {
    const char *path = getenv("NVML_STUB_STATE");
    if (path == NULL) return 0;
    FILE *file = fopen(path, "r");
    if (file == NULL) return 0;
    fclose(file);
    return 1;
}

static nvmlReturn_t error_named(const char *value) {
    if (strcmp(value, "unsupported") == 0) return NVML_ERROR_NOT_SUPPORTED;
    if (strcmp(value, "gpu_lost") == 0) return NVML_ERROR_GPU_IS_LOST;
    if (strcmp(value, "unknown") == 0) return NVML_ERROR_UNKNOWN;
    return NVML_SUCCESS;
}

/* Reads `gpuN.field` as a number, or the error it names; `fallback` when absent. */
static nvmlReturn_t gpu_number(unsigned int gpu, const char *field, unsigned long long fallback,
                               unsigned long long *out) {
    char key[64], value[256];
    snprintf(key, sizeof key, "gpu%u.%s", gpu, field);
    *out = fallback;
    if (!lookup(key, value, sizeof value)) return NVML_SUCCESS;
    nvmlReturn_t error = error_named(value);
    if (error != NVML_SUCCESS) return error;
    *out = strtoull(value, NULL, 0);
    return NVML_SUCCESS;
}

static unsigned int gpu_count(void) {
    char value[32];
    unsigned long count = lookup("gpus", value, sizeof value) ? strtoul(value, NULL, 10) : 1;
    return count > MAX_GPUS ? MAX_GPUS : (unsigned int)count;
}

/* Checks that NVML is initialised and the handle is one of ours; sets *gpu. */
static nvmlReturn_t check_device(nvmlDevice_t device, unsigned int *gpu) {
    if (init_count == 0) return NVML_ERROR_UNINITIALIZED;
    if (device < devices || device >= devices + MAX_GPUS) return NVML_ERROR_INVALID_ARGUMENT;
    *gpu = device->index;
    if (*gpu >= gpu_count()) return NVML_ERROR_GPU_IS_LOST;
    return NVML_SUCCESS;
}

static nvmlReturn_t copy_text(const char *text, char *out, unsigned int length) {
    if (out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(text) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, text, strlen(text) + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    char value[64];
    if (!have_state()) return NVML_ERROR_DRIVER_NOT_LOADED;
    if (lookup("init", value, sizeof value)) {
        if (strcmp(value, "driver_not_loaded") == 0) return NVML_ERROR_DRIVER_NOT_LOADED;
        if (strcmp(value, "unknown") == 0) return NVML_ERROR_UNKNOWN;
    }
    for (unsigned int i = 0; i < MAX_GPUS; i++) devices[i].index = i;
    init_count++;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void) {
    if (init_count == 0) return NVML_ERROR_UNINITIALIZED;
    init_count--;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    char value[80];
    if (init_count == 0) return NVML_ERROR_UNINITIALIZED;
    if (!lookup("driver_version", value, sizeof value)) snprintf(value, sizeof value, "stub");
    return copy_text(value, version, length);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount) {
    if (init_count == 0) return NVML_ERROR_UNINITIALIZED;
    if (deviceCount == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *deviceCount = gpu_count();
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (init_count == 0) return NVML_ERROR_UNINITIALIZED;
    if (device == NULL || index >= gpu_count()) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devices[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    unsigned int gpu;
    char key[64], value[96];
    nvmlReturn_t ret = check_device(device, &gpu);
    if (ret != NVML_SUCCESS) return ret;
    snprintf(key, sizeof key, "gpu%u.name", gpu);
    if (!lookup(key, value, sizeof value)) snprintf(value, sizeof value, "Stub GPU");
    return copy_text(value, name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    unsigned int gpu;
    char key[64], value[96];
    nvmlReturn_t ret = check_device(device, &gpu);
    if (ret != NVML_SUCCESS) return ret;
    snprintf(key, sizeof key, "gpu%u.uuid", gpu);
    if (!lookup(key, value, sizeof value))
        snprintf(value, sizeof value, "GPU-00000000-0000-0000-0000-%012u", gpu);
    return copy_text(value, uuid, length);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    unsigned int gpu;
    unsigned long long total, used;
    nvmlReturn_t ret = check_device(device, &gpu);
    if (ret == NVML_SUCCESS) ret = gpu_number(gpu, "memory_total", 85899345920ULL, &total);
    if (ret == NVML_SUCCESS) ret = gpu_number(gpu, "memory_used", 0, &used);
    if (ret != NVML_SUCCESS) return ret;
    if (memory == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    memory->total = total;
    memory->used = used;
    memory->free = total > used ? total - used : 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization) {
    unsigned int gpu;
    unsigned long long busy, memory;
    nvmlReturn_t ret = check_device(device, &gpu);
    if (ret == NVML_SUCCESS) ret = gpu_number(gpu, "utilization_gpu", 0, &busy);
    if (ret == NVML_SUCCESS) ret = gpu_number(gpu, "utilization_memory", 0, &memory);
    if (ret != NVML_SUCCESS) return ret;
    if (utilization == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    utilization->gpu = (unsigned int)busy;
    utilization->memory = (unsigned int)memory;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                      unsigned int *temp) {
    unsigned int gpu;
    unsigned long long value;
    nvmlReturn_t ret = check_device(device, &gpu);
    if (ret != NVML_SUCCESS) return ret;
    if (sensorType != NVML_TEMPERATURE_GPU || temp == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    ret = gpu_number(gpu, "temperature", 40, &value);
    if (ret == NVML_SUCCESS) *temp = (unsigned int)value;
    return ret;
}

static nvmlReturn_t milliwatts(nvmlDevice_t device, const char *field,
                               unsigned long long fallback, unsigned int *out) {
    unsigned int gpu;
    unsigned long long value;
    nvmlReturn_t ret = check_device(device, &gpu);
    if (ret != NVML_SUCCESS) return ret;
    if (out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    ret = gpu_number(gpu, field, fallback, &value);
    if (ret == NVML_SUCCESS) *out = (unsigned int)value;
    return ret;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power) {
    return milliwatts(device, "power", 100000, power);
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit) {
    return milliwatts(device, "power_limit", 700000, limit);
}

static nvmlReturn_t clock_reasons(nvmlDevice_t device, unsigned long long *reasons) {
    unsigned int gpu;
    nvmlReturn_t ret = check_device(device, &gpu);
    if (ret != NVML_SUCCESS) return ret;
    if (reasons == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    return gpu_number(gpu, "clock_reasons", 0, reasons);
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                       unsigned long long *reasons) {
    return clock_reasons(device, reasons);
}

#ifndef OMIT_CLOCK_EVENTS
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                    unsigned long long *reasons) {
    return clock_reasons(device, reasons);
}
#endif

#ifndef OMIT_ECC
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                         nvmlEccCounterType_t counterType,
                                         unsigned long long *eccCounts) {
    unsigned int gpu;
    nvmlReturn_t ret = check_device(device, &gpu);
    if (ret != NVML_SUCCESS) return ret;
    if (errorType != NVML_MEMORY_ERROR_TYPE_UNCORRECTED || counterType != NVML_VOLATILE_ECC ||
        eccCounts == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    return gpu_number(gpu, "ecc", 0, eccCounts);
}
#endif

/* Parses `gpuN.xids` into `xids`; returns how many, or -1 when it names an error. */
static int xids_of(unsigned int gpu, unsigned long long *xids, nvmlReturn_t *error) {
    char key[64], value[512];
    int count = 0;
    snprintf(key, sizeof key, "gpu%u.xids", gpu);
    *error = NVML_SUCCESS;
    if (!lookup(key, value, sizeof value)) return 0;
    *error = error_named(value);
    if (*error != NVML_SUCCESS) return -1;
    for (char *item = strtok(value, ","); item != NULL && count < MAX_XIDS;
         item = strtok(NULL, ","))
        xids[count++] = strtoull(item, NULL, 0);
    return count;
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
    if (init_count == 0) return NVML_ERROR_UNINITIALIZED;
    if (set == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *set = calloc(1, sizeof **set);
    return *set == NULL ? NVML_ERROR_UNKNOWN : NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                      nvmlEventSet_t set) {
    unsigned int gpu;
    unsigned long long xids[MAX_XIDS];
    nvmlReturn_t ret = check_device(device, &gpu);
    if (ret != NVML_SUCCESS) return ret;
    if (set == NULL || eventTypes != nvmlEventTypeXidCriticalError)
        return NVML_ERROR_NOT_SUPPORTED;
    int count = xids_of(gpu, xids, &ret);
    if (count < 0) return ret;
    set->registered[gpu] = 1;
    set->delivered[gpu] = (size_t)count; /* like NVML: nothing from before registration */
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data,
                                 unsigned int timeoutms) {
    (void)timeoutms; /* the stub never blocks: nothing pending is an immediate timeout */
    unsigned long long xids[MAX_XIDS];
    nvmlReturn_t error;
    if (init_count == 0) return NVML_ERROR_UNINITIALIZED;
    if (set == NULL || data == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned int gpu = 0; gpu < gpu_count(); gpu++) {
        if (!set->registered[gpu]) continue;
        int count = xids_of(gpu, xids, &error);
        if (count < 0 || (size_t)count <= set->delivered[gpu]) continue;
        memset(data, 0, sizeof *data);
        data->device = &devices[gpu];
        data->eventType = nvmlEventTypeXidCriticalError;
        data->eventData = xids[set->delivered[gpu]++];
        return NVML_SUCCESS;
    }
    return NVML_ERROR_TIMEOUT;
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
    free(set);
    return NVML_SUCCESS;
}

/* A stand-in for libnvidia-ml.so.1 with the signatures of nvml.h and the entry points pynvml
 * calls, for testing cuda_resolve/detect/_nvml.py on machines without a driver. FAKE_NVML
 * selects the machine: "h200" (default), "mixed" (two GPUs, the second lost), "none" (no
 * device), "mismatch" (nvmlInit fails as after a driver upgrade without reboot). Built with
 * -DFAKE_NVML_OLD it lacks nvmlSystemGetCudaDriverVersion_v2 and
 * nvmlDeviceGetCudaComputeCapability, as libraries older than those calls do. */
#include <stdlib.h>
#include <string.h>

typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct nvmlDevice_st *nvmlDevice_t;

static const char *mode(void) { const char *m = getenv("FAKE_NVML"); return m ? m : "h200"; }

int nvmlInitWithFlags(unsigned int flags) { return strcmp(mode(), "mismatch") == 0 ? 18 : 0; }
int nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(int result) {
    switch (result) {
    case 15: return "GPU is lost";
    case 18: return "Driver/library version mismatch";
    default: return "Unknown Error";
    }
}
int nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    strncpy(version, "580.159.04", length);
    return 0;
}
int nvmlSystemGetCudaDriverVersion(int *version) { *version = 13000; return 0; }
#ifndef FAKE_NVML_OLD
int nvmlSystemGetCudaDriverVersion_v2(int *version) { *version = 13000; return 0; }
#endif
int nvmlDeviceGetCount_v2(unsigned int *count) {
    const char *m = mode();
    *count = strcmp(m, "none") == 0 ? 0 : strcmp(m, "mixed") == 0 ? 2 : 1;
    return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (index == 1) return 15;
    *device = (nvmlDevice_t)(size_t)(index + 1);
    return 0;
}
#ifndef FAKE_NVML_OLD
int nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
    *major = 9; *minor = 0;
    return 0;
}
#endif
int nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    strncpy(name, "NVIDIA H200", length);
    return 0;
}
int nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    strncpy(uuid, "GPU-2f9c1d7e-8a41-5b3e-9c0d-6e7f8a9b0c1d", length);
    return 0;
}
int nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    memory->total = 143771ULL * 1024 * 1024;
    memory->free = memory->total;
    memory->used = 0;
    return 0;
}

/* A stand-in for libcuda.so.1 with the signatures of cuda.h, for testing the ctypes binding
 * in cuda_resolve/detect/_libcuda.py. FAKE_CUDA: "rtx3090" (default: one 8.6 GPU),
 * "nodevice" (cuInit reports CUDA_ERROR_NO_DEVICE). */
#include <stdlib.h>
#include <string.h>

typedef int CUdevice;
typedef struct { char bytes[16]; } CUuuid;

static int no_device(void) { const char *m = getenv("FAKE_CUDA"); return m && strcmp(m, "nodevice") == 0; }

int cuDriverGetVersion(int *version) { *version = 13000; return 0; }
int cuInit(unsigned int flags) { return no_device() ? 100 : 0; }
int cuGetErrorString(int error, const char **text) { *text = "no CUDA-capable device is detected"; return 0; }
int cuDeviceGetCount(int *count) { *count = 1; return 0; }
int cuDeviceGet(CUdevice *device, int ordinal) { *device = ordinal; return 0; }
int cuDeviceGetAttribute(int *value, int attribute, CUdevice device) {
    if (attribute == 75) { *value = 8; return 0; }
    if (attribute == 76) { *value = 6; return 0; }
    return 1;
}
int cuDeviceGetName(char *name, int length, CUdevice device) {
    strncpy(name, "NVIDIA GeForce RTX 3090", (size_t)length);
    return 0;
}
int cuDeviceTotalMem_v2(size_t *bytes, CUdevice device) { *bytes = (size_t)24576 * 1024 * 1024; return 0; }
int cuDeviceGetUuid(CUuuid *uuid, CUdevice device) {
    static const unsigned char raw[16] = {0x9f, 0x8e, 0x7d, 0x6c, 0x5b, 0x4a, 0x39, 0x28,
                                          0x17, 0x06, 0xf5, 0xe4, 0xd3, 0xc2, 0xb1, 0xa0};
    memcpy(uuid->bytes, raw, 16);
    return 0;
}

/* A stand-in for the NVIDIA driver's libcuda.so.1, for tests of `kiln doctor` on machines without
 * a GPU. It has the entry points the doctor calls; what they answer comes from the environment:
 *   KILN_STUB_CUDA_VERSION  the CUDA version cuDriverGetVersion reports (e.g. 13000; default 13000)
 *   KILN_STUB_CUDA_DEVICES  the GPUs, "NAME:MAJOR.MINOR" separated by ';' (default: none)
 *   KILN_STUB_CUDA_INIT     a CUresult for cuInit to fail with (e.g. 100, no device; default 0)
 * CMake builds it (without sanitizers: it is loaded into an uninstrumented Python) as
 * libcuda.so.<driver release> with the soname libcuda.so.1, like the driver. */
#include <cstdlib>
#include <cstring>

typedef int CUresult;
typedef int CUdevice;

enum { kMaxDevices = 16, kMaxName = 200 };

struct Device {
  char name[kMaxName];
  int major, minor;
};

namespace {

int parse_devices(Device* out) {
  const char* spec = getenv("KILN_STUB_CUDA_DEVICES");
  int n = 0;
  if (!spec) return 0;
  while (*spec && n < kMaxDevices) {
    const char* end = strchr(spec, ';');
    size_t len = end ? (size_t)(end - spec) : strlen(spec);
    const char* colon = nullptr;
    for (size_t i = 0; i < len; ++i)
      if (spec[i] == ':') colon = spec + i;
    if (colon) {
      size_t name_len = (size_t)(colon - spec);
      if (name_len >= kMaxName) name_len = kMaxName - 1;
      memcpy(out[n].name, spec, name_len);
      out[n].name[name_len] = '\0';
      out[n].major = atoi(colon + 1);
      const char* dot = strchr(colon, '.');
      out[n].minor = dot && dot < spec + len ? atoi(dot + 1) : 0;
      ++n;
    }
    if (!end) break;
    spec = end + 1;
  }
  return n;
}

}  // namespace

extern "C" {

CUresult cuInit(unsigned int flags) {
  (void)flags;
  const char* fail = getenv("KILN_STUB_CUDA_INIT");
  return fail ? atoi(fail) : 0;
}

CUresult cuDriverGetVersion(int* version) {
  const char* v = getenv("KILN_STUB_CUDA_VERSION");
  if (!version) return 1;
  *version = v ? atoi(v) : 13000;
  return 0;
}

CUresult cuDeviceGetCount(int* count) {
  Device devices[kMaxDevices];
  if (!count) return 1;
  *count = parse_devices(devices);
  return 0;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  Device devices[kMaxDevices];
  if (!device || ordinal < 0 || ordinal >= parse_devices(devices)) return 101; /* invalid device */
  *device = ordinal;
  return 0;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice device) {
  Device devices[kMaxDevices];
  if (!name || len <= 0 || device < 0 || device >= parse_devices(devices)) return 101;
  strncpy(name, devices[device].name, (size_t)len - 1);
  name[len - 1] = '\0';
  return 0;
}

CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice device) {
  Device devices[kMaxDevices];
  if (!value || device < 0 || device >= parse_devices(devices)) return 101;
  if (attribute == 75)
    *value = devices[device].major; /* compute capability major */
  else if (attribute == 76)
    *value = devices[device].minor; /* compute capability minor */
  else
    *value = 0;
  return 0;
}

CUresult cuGetErrorString(CUresult error, const char** text) {
  if (!text) return 1;
  switch (error) {
    case 0:
      *text = "no error";
      break;
    case 100:
      *text = "no CUDA-capable device is detected";
      break;
    case 101:
      *text = "invalid device ordinal";
      break;
    case 999:
      *text = "unknown error";
      break;
    default:
      *text = "stub error";
      break;
  }
  return 0;
}

}  // extern "C"

// Device code of the GPU check (gpu_check.c), compiled to PTX by
// gen-ptx.sh into kernels_ptx.h, which the program loads with
// cuModuleLoadData: PTX, so the driver compiles it for whatever GPU runs it.
// Same arithmetic as the simulated driver's kernels of the same names.

extern "C" __global__ void fill_u32(unsigned *p, unsigned seed, unsigned long long n)
{
	unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;

	for (; i < n; i += stride)
		p[i] = ((unsigned)i * 2654435761u) ^ seed;
}

extern "C" __global__ void lcg_u32(unsigned *p, unsigned long long n)
{
	unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;

	for (; i < n; i += stride)
		p[i] = p[i] * 1664525u + 1013904223u;
}

// Counts elements that differ from fill_u32's pattern after the affine map
// x -> a*x + c (the lcg applied k times, composed on the host).
extern "C" __global__ void verify_u32(const unsigned *p, unsigned seed, unsigned long long n, unsigned a,
				      unsigned c, unsigned long long *errors)
{
	unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
	unsigned long long bad = 0;

	for (; i < n; i += stride)
		bad += p[i] != a * (((unsigned)i * 2654435761u) ^ seed) + c;
	if (bad)
		atomicAdd(errors, bad);
}

// The launch-rate loop's kernel: as little work as a launch can carry.
extern "C" __global__ void noop(void)
{
}

/* Built only by tests/cuda/abi-check.sh, where NVIDIA's cuda.h is
 * installed: the project's declarations (plugins/cuda/cuda_abi.h) in their
 * check mode, after the real header. Every check is a static assertion, so
 * building this file is the test; running it only says so. */
#include <cuda.h>
#include <stdio.h>

#define CK_CUDA_ABI_CHECK
#include "plugins/cuda/cuda_abi.h"

int main(void)
{
	printf("cuda_abi.h matches cuda.h %d.%d\n", CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
	return 0;
}

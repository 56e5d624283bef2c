/* fpu_avx: the extended register state (AVX2 ymm, SSE MXCSR, x87).
 *
 * State exercised:
 *  1. all sixteen ymm registers, upper halves included, held live inside one
 *     long asm loop for about a second: a checkpoint will almost always stop
 *     the thread in the middle of it, so the registers (not memory) carry the
 *     state. The same recurrence is then run in short pieces that keep the
 *     state in memory; both results must agree.
 *  2. a non-default rounding mode (upward) and the FTZ/DAZ bits of MXCSR,
 *     with long sums in double (SSE) and long double (x87) whose results
 *     depend on that mode; the mode must still be set at the end.
 *  3. an AVX2 intrinsics loop checked against a scalar reference.
 * Usage: fpu_avx [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <fenv.h>
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MXCSR_FTZ (1u << 15)
#define MXCSR_DAZ (1u << 6)

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

/* ymm0..ymm15 <- regs, iterate, regs <- ymm0..ymm15. iters >= 1. */
static void ymm_run(uint64_t regs[16][4], uint64_t iters)
{
	__asm__ volatile(
		"vmovdqu   0(%[r]), %%ymm0\n\t"
		"vmovdqu  32(%[r]), %%ymm1\n\t"
		"vmovdqu  64(%[r]), %%ymm2\n\t"
		"vmovdqu  96(%[r]), %%ymm3\n\t"
		"vmovdqu 128(%[r]), %%ymm4\n\t"
		"vmovdqu 160(%[r]), %%ymm5\n\t"
		"vmovdqu 192(%[r]), %%ymm6\n\t"
		"vmovdqu 224(%[r]), %%ymm7\n\t"
		"vmovdqu 256(%[r]), %%ymm8\n\t"
		"vmovdqu 288(%[r]), %%ymm9\n\t"
		"vmovdqu 320(%[r]), %%ymm10\n\t"
		"vmovdqu 352(%[r]), %%ymm11\n\t"
		"vmovdqu 384(%[r]), %%ymm12\n\t"
		"vmovdqu 416(%[r]), %%ymm13\n\t"
		"vmovdqu 448(%[r]), %%ymm14\n\t"
		"vmovdqu 480(%[r]), %%ymm15\n\t"
		"1:\n\t"
		"vpaddq  %%ymm15, %%ymm0, %%ymm0\n\t"
		"vpxor   %%ymm0, %%ymm1, %%ymm1\n\t"
		"vpsllq  $7, %%ymm1, %%ymm14\n\t"
		"vpsrlq  $57, %%ymm1, %%ymm13\n\t"
		"vpor    %%ymm13, %%ymm14, %%ymm14\n\t"
		"vpaddq  %%ymm14, %%ymm2, %%ymm2\n\t"
		"vpxor   %%ymm2, %%ymm3, %%ymm3\n\t"
		"vpaddq  %%ymm3, %%ymm4, %%ymm4\n\t"
		"vpermq  $0x39, %%ymm4, %%ymm12\n\t"
		"vpxor   %%ymm12, %%ymm5, %%ymm5\n\t"
		"vpaddq  %%ymm5, %%ymm6, %%ymm6\n\t"
		"vpxor   %%ymm6, %%ymm7, %%ymm7\n\t"
		"vpaddq  %%ymm7, %%ymm8, %%ymm8\n\t"
		"vpxor   %%ymm8, %%ymm9, %%ymm9\n\t"
		"vpaddq  %%ymm9, %%ymm10, %%ymm10\n\t"
		"vpxor   %%ymm10, %%ymm11, %%ymm11\n\t"
		"dec     %[n]\n\t"
		"jnz     1b\n\t"
		"vmovdqu %%ymm0,    0(%[r])\n\t"
		"vmovdqu %%ymm1,   32(%[r])\n\t"
		"vmovdqu %%ymm2,   64(%[r])\n\t"
		"vmovdqu %%ymm3,   96(%[r])\n\t"
		"vmovdqu %%ymm4,  128(%[r])\n\t"
		"vmovdqu %%ymm5,  160(%[r])\n\t"
		"vmovdqu %%ymm6,  192(%[r])\n\t"
		"vmovdqu %%ymm7,  224(%[r])\n\t"
		"vmovdqu %%ymm8,  256(%[r])\n\t"
		"vmovdqu %%ymm9,  288(%[r])\n\t"
		"vmovdqu %%ymm10, 320(%[r])\n\t"
		"vmovdqu %%ymm11, 352(%[r])\n\t"
		"vmovdqu %%ymm12, 384(%[r])\n\t"
		"vmovdqu %%ymm13, 416(%[r])\n\t"
		"vmovdqu %%ymm14, 448(%[r])\n\t"
		"vmovdqu %%ymm15, 480(%[r])\n\t"
		"vzeroupper\n\t"
		: [n] "+r"(iters)
		: [r] "r"(regs)
		: "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
		  "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
}

static void ymm_init(uint64_t regs[16][4])
{
	uint64_t x = 0x9e3779b97f4a7c15ULL;

	for (int r = 0; r < 16; r++)
		for (int l = 0; l < 4; l++) {
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
			regs[r][l] = x | 1;
		}
}

static uint64_t fold(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

static int part_ymm(uint64_t iters)
{
	static uint64_t a[16][4] __attribute__((aligned(32)));
	static uint64_t b[16][4] __attribute__((aligned(32)));
	const uint64_t pieces = 1000;
	uint64_t per = iters / pieces;

	if (per == 0)
		per = 1;
	ymm_init(a);
	ymm_init(b);
	ymm_run(a, per * pieces); /* one long stretch in registers */
	for (uint64_t i = 0; i < pieces; i++)
		ymm_run(b, per);
	printf("ymm: %llu iterations, state %016llx\n", (unsigned long long)(per * pieces),
	       (unsigned long long)fold(a, sizeof(a)));
	if (memcmp(a, b, sizeof(a)) != 0) {
		printf("FAIL ymm: long run %016llx != pieces %016llx\n", (unsigned long long)fold(a, sizeof(a)),
		       (unsigned long long)fold(b, sizeof(b)));
		return 1;
	}
	return 0;
}

static int part_rounding(long n)
{
	volatile double tiny = 1e-310; /* denormal: FTZ/DAZ make it 0 */
	double sum = 0.0, z;
	long double lsum = 0.0L;
	unsigned int csr;
	int rc = 0;

	fesetround(FE_UPWARD);
	csr = _mm_getcsr();
	_mm_setcsr(csr | MXCSR_FTZ | MXCSR_DAZ);
	for (long i = 1; i <= n; i++) {
		sum += 1.0 / (double)i;
		lsum += 1.0L / (long double)i;
	}
	z = tiny * 1.0;
	csr = _mm_getcsr();
	printf("rounding: sum %a, x87 sum %La, denormal %s\n", sum, lsum, z == 0.0 ? "flushed" : "kept");
	if (fegetround() != FE_UPWARD || !(csr & MXCSR_FTZ) || !(csr & MXCSR_DAZ) || z != 0.0) {
		printf("FAIL rounding: mode %d mxcsr %#x\n", fegetround(), csr);
		rc = 1;
	}
	fesetround(FE_TONEAREST);
	_mm_setcsr(_mm_getcsr() & ~(MXCSR_FTZ | MXCSR_DAZ));
	return rc;
}

#define VN 4096
static double vx[VN] __attribute__((aligned(32))), vy[VN] __attribute__((aligned(32)));
static double sx[VN], sy[VN];

static int part_intrinsics(long passes)
{
	const __m256d a = _mm256_set1_pd(0.999), c = _mm256_set1_pd(0.5);
	double vsum = 0, ssum = 0;

	for (int i = 0; i < VN; i++) {
		vx[i] = sx[i] = (double)(i % 97) / 97.0;
		vy[i] = sy[i] = (double)(i % 89) / 89.0;
	}
	for (long p = 0; p < passes; p++)
		for (int i = 0; i < VN; i += 4) {
			__m256d y = _mm256_load_pd(&vy[i]), x = _mm256_load_pd(&vx[i]);
			y = _mm256_add_pd(_mm256_mul_pd(y, a), _mm256_mul_pd(x, c));
			_mm256_store_pd(&vy[i], y);
		}
	for (long p = 0; p < passes / 8; p++) /* reference: fewer passes, then compare the prefix run */
		for (int i = 0; i < VN; i++)
			sy[i] = sy[i] * 0.999 + sx[i] * 0.5;
	for (long p = passes / 8; p < passes; p++)
		for (int i = 0; i < VN; i++)
			sy[i] = sy[i] * 0.999 + sx[i] * 0.5;
	for (int i = 0; i < VN; i++) {
		vsum += vy[i];
		ssum += sy[i];
	}
	printf("avx2: %ld passes, sum %a\n", passes, vsum);
	if (memcmp(vy, sy, sizeof(vy)) != 0) {
		printf("FAIL avx2: vector %a != scalar %a\n", vsum, ssum);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	double scale = app_scale(argc, argv);
	int rc = 0;

	if (!__builtin_cpu_supports("avx2")) {
		printf("fpu_avx: no AVX2 on this CPU, x87/SSE parts only\n");
	} else {
		rc |= part_ymm((uint64_t)(500e6 * scale));
		rc |= part_intrinsics((long)(20000 * scale));
	}
	rc |= part_rounding((long)(60e6 * scale));
	printf("fpu_avx: %s\n", rc ? "FAIL" : "ok");
	return rc;
}

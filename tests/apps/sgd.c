/* sgd: a small training job, the kind of program ckrun exists for.
 *
 * A one-hidden-layer perceptron (tanh) learns a fixed non-linear function of
 * synthetic data drawn from a fixed-seed generator, with mini-batch
 * stochastic gradient descent and momentum. State exercised: a few hundred
 * kilobytes of parameters, optimiser state and data in the heap, floating
 * point registers in the middle of tight loops, and the position in the data
 * stream. Prints the full-data loss every 1000 steps and, at the end, a
 * checksum of the parameters' bytes: any lost or repeated step changes it.
 * Usage: sgd [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 5 s) */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 4096  /* samples */
#define D 32    /* inputs */
#define H 64    /* hidden units */
#define BATCH 32
#define REPORT 1000

static double X[N][D], Y[N];
static double W1[H][D], B1[H], W2[H], B2;
static double V1[H][D], VB1[H], V2[H], VB2; /* momentum */
static uint64_t rng = 0x2545f4914f6cdd1dULL;

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static double uniform(void) /* [-1, 1) */
{
	return (double)(next() >> 11) / 4503599627370496.0 - 1.0;
}

static double forward(const double *x, double *h)
{
	double out = B2;

	for (int j = 0; j < H; j++) {
		double a = B1[j];
		for (int i = 0; i < D; i++)
			a += W1[j][i] * x[i];
		h[j] = tanh(a);
		out += W2[j] * h[j];
	}
	return out;
}

static double full_loss(void)
{
	double h[H], sum = 0;

	for (int n = 0; n < N; n++) {
		double e = forward(X[n], h) - Y[n];
		sum += e * e;
	}
	return sum / N;
}

static uint64_t checksum(void)
{
	const unsigned char *parts[] = { (void *)W1, (void *)B1, (void *)W2, (void *)&B2 };
	const size_t sizes[] = { sizeof(W1), sizeof(B1), sizeof(W2), sizeof(B2) };
	uint64_t h = 0xcbf29ce484222325ULL;

	for (int p = 0; p < 4; p++)
		for (size_t i = 0; i < sizes[p]; i++)
			h = (h ^ parts[p][i]) * 0x100000001b3ULL;
	return h;
}

int main(int argc, char **argv)
{
	long steps = (long)(40000 * app_scale(argc, argv));
	const double lr = 0.01, mom = 0.9;
	double teacher[D];

	if (steps < 1)
		steps = 1;
	/* Data: y = sin(2 t.x) + 0.3 (x0 * x1), t a fixed random direction. */
	for (int i = 0; i < D; i++)
		teacher[i] = uniform() / sqrt((double)D) * 2.0;
	for (int n = 0; n < N; n++) {
		double d = 0;
		for (int i = 0; i < D; i++) {
			X[n][i] = uniform();
			d += teacher[i] * X[n][i];
		}
		Y[n] = sin(2.0 * d) + 0.3 * X[n][0] * X[n][1];
	}
	for (int j = 0; j < H; j++) {
		for (int i = 0; i < D; i++)
			W1[j][i] = uniform() / sqrt((double)D);
		W2[j] = uniform() / sqrt((double)H);
	}
	printf("sgd: %d samples, %d-%d-1 tanh network, batch %d, %ld steps\n", N, D, H, BATCH, steps);
	printf("step %6d loss %.9f\n", 0, full_loss());

	for (long s = 1; s <= steps; s++) {
		static double g1[H][D], gb1[H], g2[H];
		double gb2 = 0, h[H];

		memset(g1, 0, sizeof(g1));
		memset(gb1, 0, sizeof(gb1));
		memset(g2, 0, sizeof(g2));
		for (int b = 0; b < BATCH; b++) {
			int n = (int)(next() % N);
			double e = forward(X[n], h) - Y[n];
			gb2 += e;
			for (int j = 0; j < H; j++) {
				double dh = e * W2[j] * (1.0 - h[j] * h[j]);
				g2[j] += e * h[j];
				gb1[j] += dh;
				for (int i = 0; i < D; i++)
					g1[j][i] += dh * X[n][i];
			}
		}
		for (int j = 0; j < H; j++) {
			for (int i = 0; i < D; i++) {
				V1[j][i] = mom * V1[j][i] - lr * g1[j][i] / BATCH;
				W1[j][i] += V1[j][i];
			}
			VB1[j] = mom * VB1[j] - lr * gb1[j] / BATCH;
			B1[j] += VB1[j];
			V2[j] = mom * V2[j] - lr * g2[j] / BATCH;
			W2[j] += V2[j];
		}
		VB2 = mom * VB2 - lr * gb2 / BATCH;
		B2 += VB2;
		if (s % REPORT == 0 || s == steps)
			printf("step %6ld loss %.9f\n", s, full_loss());
	}
	printf("sgd: final checksum %016llx\n", (unsigned long long)checksum());
	return 0;
}

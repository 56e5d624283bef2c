/* Minimal unit-test helpers: assertions print both operands and where. */
#ifndef CK_UNIT_H
#define CK_UNIT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern int ck_unit_failures;

#define CHECK(cond)                                                                       \
	do {                                                                              \
		if (!(cond)) {                                                            \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
			ck_unit_failures++;                                               \
		}                                                                         \
	} while (0)

#define CHECK_EQ_INT(a, b)                                                                        \
	do {                                                                                      \
		long long _a = (long long)(a), _b = (long long)(b);                               \
		if (_a != _b) {                                                                   \
			fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, #a, \
				#b, _a, _b);                                                      \
			ck_unit_failures++;                                                       \
		}                                                                                 \
	} while (0)

#define CHECK_EQ_STR(a, b)                                                                          \
	do {                                                                                        \
		const char *_a = (a), *_b = (b);                                                    \
		if (!_a || !_b || strcmp(_a, _b)) {                                                 \
			fprintf(stderr, "%s:%d: %s == %s failed:\n  got:      %s\n  expected: %s\n", \
				__FILE__, __LINE__, #a, #b, _a ? _a : "(null)", _b ? _b : "(null)");     \
			ck_unit_failures++;                                                         \
		}                                                                                   \
	} while (0)

/* A whole file, malloc'd (NULL if it cannot be read); its size in *len. */
void *ck_unit_read_file(const char *path, size_t *len);

/* Each test file defines this; main() in unit.c calls it and reports. */
void ck_unit_run(void);

#endif

/* Derived datatypes (contiguous and vector of a predefined type), kept in
 * the program: data travels packed as elements of the predefined type (the
 * same type signature, so a vector of 3 ints matches 3 MPI_INT at the other
 * end), packed into the arena and unpacked out of it here. Supported where
 * the call copies through pack/unpack (Send, Recv, Isend, Irecv, Sendrecv,
 * Bcast, Get_count);
 * elsewhere a derived type fails in one line naming the function. */
#include <stdlib.h>
#include <string.h>

#include "plugins/mpi/standin/sti.h"

#define MAX_TYPES 128
#define TYPE_MAGIC 0x636b7479u /* "ckty" */

struct ck__dtype {
	uint32_t magic;
	int base, committed;
	size_t bsize;                /* the predefined type's size (= extent) */
	int count, blocklen, stride; /* a vector; contiguous: 1 block of count */
	size_t size, extent;
};

static struct ck__dtype *types[MAX_TYPES];

static const struct ck__dtype *derived(MPI_Datatype t)
{
	for (int i = 0; i < MAX_TYPES; i++)
		if (types[i] && (void *)types[i] == (void *)t)
			return types[i];
	return NULL;
}

int ck__sti_is_derived(MPI_Datatype t)
{
	return derived(t) != NULL;
}

void ck__sti_tinfo(const char *fn, MPI_Datatype t, struct ck__tinfo *ti)
{
	const struct ck__dtype *d = derived(t);

	memset(ti, 0, sizeof(*ti));
	if (!d) {
		ti->wire = ck__sti_type(fn, t, &ti->size);
		ti->extent = ti->size;
		ti->nbase = 1;
		return;
	}
	if (!d->committed)
		ck__sti_die(fn, "datatype %p is used before MPI_Type_commit", (void *)t);
	ti->wire = d->base;
	ti->size = d->size;
	ti->extent = d->extent;
	ti->nbase = d->count * d->blocklen;
	ti->count = d->count;
	ti->blocklen = d->blocklen;
	ti->stride = d->stride;
	ti->bsize = d->bsize;
	ti->derived = 1;
}

void ck__sti_pack(void *dst, const void *src, size_t count, const struct ck__tinfo *ti)
{
	size_t blk = (size_t)ti->blocklen * ti->bsize;
	char *o = dst;

	if (!ti->derived) {
		memcpy(dst, src, count * ti->size);
		return;
	}
	for (size_t e = 0; e < count; e++)
		for (int b = 0; b < ti->count; b++, o += blk)
			memcpy(o, (const char *)src + e * ti->extent + (size_t)b * (size_t)ti->stride * ti->bsize, blk);
}

void ck__sti_unpack(void *dst, const void *src, size_t bytes, const struct ck__tinfo *ti)
{
	size_t blk = (size_t)ti->blocklen * ti->bsize, n;
	const char *i = src;

	if (!ti->derived) {
		memcpy(dst, src, bytes);
		return;
	}
	for (size_t e = 0; bytes; e++)
		for (int b = 0; b < ti->count && bytes; b++, i += n, bytes -= n) {
			n = bytes < blk ? bytes : blk;
			memcpy((char *)dst + e * ti->extent + (size_t)b * (size_t)ti->stride * ti->bsize, i, n);
		}
}

static int make(const char *fn, int count, int blocklen, int stride, MPI_Datatype old, MPI_Datatype *out)
{
	struct ck__dtype *d;
	size_t bsize;
	int base, i;

	if (derived(old))
		ck__sti_die(fn, "a derived type of a derived type is not supported (yet)");
	base = ck__sti_type(fn, old, &bsize);
	if (count < 0 || blocklen < 0 || stride < blocklen)
		return MPI_ERR_ARG;
	for (i = 0; i < MAX_TYPES && types[i]; i++)
		;
	if (i == MAX_TYPES)
		ck__sti_die(fn, "more than %d derived datatypes", MAX_TYPES);
	d = calloc(1, sizeof(*d));
	if (!d)
		ck__sti_die(fn, "out of memory");
	d->magic = TYPE_MAGIC;
	d->base = base;
	d->bsize = bsize;
	d->count = count;
	d->blocklen = blocklen;
	d->stride = stride;
	d->size = (size_t)count * (size_t)blocklen * bsize;
	d->extent = count ? ((size_t)(count - 1) * (size_t)stride + (size_t)blocklen) * bsize : 0;
	types[i] = d;
	*out = (MPI_Datatype)(void *)d;
	return MPI_SUCCESS;
}

int MPI_Type_contiguous(int count, MPI_Datatype old, MPI_Datatype *out)
{
	return make("MPI_Type_contiguous", 1, count, count, old, out);
}

int MPI_Type_vector(int count, int blocklen, int stride, MPI_Datatype old, MPI_Datatype *out)
{
	return make("MPI_Type_vector", count, blocklen, stride, old, out);
}

int MPI_Type_commit(MPI_Datatype *t)
{
	struct ck__dtype *d = (struct ck__dtype *)derived(*t);

	if (!d) {
		size_t s;

		(void)ck__sti_type("MPI_Type_commit", *t, &s); /* predefined: nothing to do */
		return MPI_SUCCESS;
	}
	d->committed = 1;
	return MPI_SUCCESS;
}

int MPI_Type_free(MPI_Datatype *t)
{
	for (int i = 0; i < MAX_TYPES; i++)
		if (types[i] && (void *)types[i] == (void *)*t) {
			free(types[i]);
			types[i] = NULL;
			*t = MPI_DATATYPE_NULL;
			return MPI_SUCCESS;
		}
	ck__sti_die("MPI_Type_free", "datatype %p is not a derived one", (void *)*t);
}

/* Sizes and extents, derived or predefined (the lower bound is 0). */
int ck__sti_type_geometry(MPI_Datatype t, size_t *size, size_t *extent)
{
	const struct ck__dtype *d = derived(t);

	if (!d)
		return 0;
	*size = d->size;
	*extent = d->extent;
	return 1;
}

/* The size of a module image. cuModuleLoadData is given a pointer only;
 * the plugin must copy the image to load it again after a restart, so it
 * finds the end the way the driver does: from the ELF headers of a cubin,
 * from the header of a fatbin, or at the NUL ending a PTX (or other text)
 * image. */
#include "cu_internal.h"

#include <elf.h>
#include <string.h>

#define FATBIN_MAGIC 0xba55ed50u

struct fatbin_head {
	uint32_t magic;
	uint16_t version;
	uint16_t header_size;
	uint64_t fat_size; /* bytes after the header */
};

static size_t elf_size(const Elf64_Ehdr *eh)
{
	const char *base = (const char *)eh;
	size_t end = sizeof(*eh), e;
	int i;

	if (eh->e_ident[EI_CLASS] != ELFCLASS64)
		return 0;
	e = eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
	if (e > end)
		end = e;
	e = eh->e_phoff + (size_t)eh->e_phnum * eh->e_phentsize;
	if (e > end)
		end = e;
	for (i = 0; i < eh->e_shnum; i++) {
		const Elf64_Shdr *sh = (const Elf64_Shdr *)(base + eh->e_shoff + (size_t)i * eh->e_shentsize);

		if (sh->sh_type != SHT_NOBITS && sh->sh_offset + sh->sh_size > end)
			end = sh->sh_offset + sh->sh_size;
	}
	return end;
}

size_t ck_cu_image_size(const void *image)
{
	const unsigned char *b = image;
	struct fatbin_head fh;

	if (!memcmp(b, ELFMAG, SELFMAG)) {
		size_t n = elf_size(image);
		if (n)
			return n;
	}
	memcpy(&fh, b, sizeof(fh));
	if (fh.magic == FATBIN_MAGIC)
		return (size_t)fh.header_size + fh.fat_size;
	return strlen(image) + 1;
}

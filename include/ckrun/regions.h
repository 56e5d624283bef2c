/* ckrun contract: flags of a memory region.
 *
 * Version: part of the manifest format (CK_MANIFEST_VERSION in
 * ckrun/manifest_format.h); a flag's meaning never changes, new flags may
 * be added. Used in manifests (struct ck_region), in the layout ckrun hands
 * the restorer (struct ck_rst_region, ckrun/proto.h) and by ckpt inspect. */
#ifndef CK_CONTRACT_REGIONS_H
#define CK_CONTRACT_REGIONS_H

#define CK_REG_SHARED 0x001  /* MAP_SHARED */
#define CK_REG_FILE 0x002    /* file-backed: path/dev/ino/file_off valid */
#define CK_REG_STACK 0x004   /* [stack] of the main thread */
#define CK_REG_HEAP 0x008    /* [heap] (brk area) */
#define CK_REG_VDSO 0x010    /* [vdso]: not saved, kernel provides one */
#define CK_REG_VVAR 0x020    /* [vvar], [vvar_vclock]: not saved */
#define CK_REG_VSYSCALL 0x040 /* [vsyscall]: fixed, not saved */
#define CK_REG_NODATA 0x080  /* no content saved (special, or skipped) */
#define CK_REG_DELETED 0x100 /* backing file was deleted: content saved */
#define CK_REG_GROWSDOWN 0x200
#define CK_REG_PLUGIN 0x400 /* left out for a plugin (device memory): not saved, not mapped */
#define CK_REG_SYSV 0x800   /* System V shared memory: ino is the segment's id, bytes in the SYSV section */
#define CK_REG_DENSE 0x1000 /* private anonymous, 90% or more of its pages held data at the cut (a restore hint) */
/* The mapping's madvise() advice at the cut (smaps VmFlags), given again at restore. */
#define CK_REG_ADV_HUGE 0x2000       /* MADV_HUGEPAGE ("hg") */
#define CK_REG_ADV_NOHUGE 0x4000     /* MADV_NOHUGEPAGE ("nh") */
#define CK_REG_ADV_WIPEONFORK 0x8000 /* MADV_WIPEONFORK ("wf") */
#define CK_REG_ADV_DONTDUMP 0x10000  /* MADV_DONTDUMP ("dd") */
/* Private file mapping whose pages were all the file's own at the cut (no
 * copy-on-write copy): not saved (with CK_REG_NODATA), mapped from the file
 * at file_off again; the file's identity is in the manifest's FILE table. */
#define CK_REG_FILEPAGES 0x20000
/* Mapped with MAP_NORESERVE ("nr"): no commit charge, so that a sparse
 * region larger than memory and swap can be mapped again (a restore
 * without it is refused by the overcommit heuristic). */
#define CK_REG_NORESERVE 0x40000
/* More advice (smaps VmFlags), given again at restore. */
#define CK_REG_ADV_DONTFORK 0x80000    /* MADV_DONTFORK ("dc") */
#define CK_REG_ADV_RANDOM 0x100000     /* MADV_RANDOM ("rr") */
#define CK_REG_ADV_SEQUENTIAL 0x200000 /* MADV_SEQUENTIAL ("sr") */

#endif

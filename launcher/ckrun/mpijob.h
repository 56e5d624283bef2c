/* ckrun --np: MPI jobs (mpijob.c). */
#ifndef CK_MPIJOB_H
#define CK_MPIJOB_H

struct ckrun;
struct ck_manifest;

/* --np N */
int ck_mpi_parse_np(struct ckrun *c, const char *arg);
/* ckrun under mpirun, or mpirun as the job: refused in one line. */
int ck_mpi_refuse_nesting(struct ckrun *c);
/* The job becomes ckmpi-ranks N KEY PROFILE -- PROGRAM...; finds the
 * agent and asks it for PROFILE. */
int ck_mpi_prepare(struct ckrun *c);
/* A resume of checkpoint m with this --np (or none): refused in one line
 * naming the --np it needs (-EINVAL), or Open MPI's version and the pinned
 * settings if they differ from the checkpoint's (-EXDEV), before any agent
 * starts. */
int ck_mpi_check_resume(const struct ckrun *c, const struct ck_manifest *m);
/* mpirun -np N ckmpi-agent --serve KEY [--restore], outside the job. */
int ck_mpi_start(struct ckrun *c, int restore);
/* 1 and mpirun's status if it has ended (the agents are gone). */
int ck_mpi_exited(struct ckrun *c, int *status);
/* Ends the agents (the job has ended or stopped). */
void ck_mpi_stop(struct ckrun *c);

#endif

/* sysvsem: a System V semaphore set in use while a checkpoint is asked for:
 * the round must be refused naming it, and the job must go on. */
#include <stdio.h>
#include <sys/ipc.h>
#include <sys/sem.h>
#include <unistd.h>

int main(void)
{
	int id = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
	struct sembuf up = {0, 1, 0}, down = {0, -1, 0};

	if (id < 0)
		return 1;
	for (int i = 0; i < 25; i++) {
		if (semop(id, &up, 1) < 0 || semop(id, &down, 1) < 0)
			return 1;
		usleep(100000);
	}
	semctl(id, 0, IPC_RMID);
	printf("sysvsem: 25 rounds\n");
	return 0;
}

/* AWS Signature Version 4, written for ckrun's S3 client.
 *
 * The signer works on a request as it goes on the wire: method, path as sent
 * (percent-encoded), query parameters (decoded), headers and the payload hash.
 * Two path rules exist:
 *   S3 (normalize = 0): the path is signed as the object key is named: no
 *     dot-segment removal, no slash collapsing, encoded exactly once.
 *   generic (normalize = 1): what other AWS services do: dot segments and
 *     repeated slashes removed, and the sent path encoded once more.
 * The published test suites use the generic rule, S3 needs the other. */
#ifndef CK_SIGV4_H
#define CK_SIGV4_H

#include <stddef.h>

#define CK_SHA256_HEX_LEN 64
#define CK_SIGV4_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

struct ck_sigv4_kv {
	const char *name;
	const char *value; /* NULL is signed as the empty string ("?uploads" -> "uploads=") */
};

struct ck_sigv4_req {
	const char *method;
	const char *path; /* as sent, may hold %XX; "" means "/" */
	const struct ck_sigv4_kv *query;
	size_t nquery;
	const struct ck_sigv4_kv *headers; /* every header here is signed */
	size_t nheaders;
	const char *payload_hash; /* hex SHA-256 of the body, or a literal such as UNSIGNED-PAYLOAD */
	int normalize;
};

struct ck_sigv4_key {
	const char *access_key;
	const char *secret_key;
	const char *region;
	const char *service;
};

void ck_sha256_hex(const void *data, size_t len, char out[CK_SHA256_HEX_LEN + 1]);
void ck_hex(const unsigned char *in, size_t n, char *out);

/* Canonical request and the ';'-joined list of signed header names
 * (both malloc'd). Returns 0 or -ENOMEM. */
int ck_sigv4_canonical_request(const struct ck_sigv4_req *r, char **creq, char **signed_headers);
/* "20150830/us-east-1/service/aws4_request" from "20150830T123600Z". */
void ck_sigv4_scope(char *out, size_t outlen, const char *amz_date, const char *region, const char *service);
/* String to sign for a canonical request (malloc'd). */
int ck_sigv4_string_to_sign(const char *amz_date, const char *scope, const char *creq, char **sts);
/* kSigning = HMAC chain over date, region, service, "aws4_request". */
void ck_sigv4_signing_key(const char *secret, const char *amz_date, const char *region, const char *service,
			  unsigned char key[32]);
/* Hex HMAC-SHA256 of sts under key. */
void ck_sigv4_signature(const unsigned char key[32], const char *sts, char out[CK_SHA256_HEX_LEN + 1]);
/* Whole chain: the value of the Authorization header (malloc'd). */
int ck_sigv4_authorization(const struct ck_sigv4_key *k, const char *amz_date, const struct ck_sigv4_req *r,
			   char **authz);
/* "YYYYMMDDTHHMMSSZ" for a UTC time. */
void ck_sigv4_amz_date(long long unix_time, char out[17]);

#endif

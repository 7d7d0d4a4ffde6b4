/*
 * pom_acl_i.h -- POSIX ACLs of libpomegranate (pom_acl.c): the values of
 * the xattrs system.posix_acl_access and system.posix_acl_default, in the
 * Linux xattr format the kernel hands a FUSE file system, all little
 * endian:
 *
 *   offset  size  field
 *   0       4     version   POM_ACL_VERSION (2)
 *   4+8k    2     tag       POM_ACL_USER_OBJ ... POM_ACL_OTHER
 *   6+8k    2     perm      bits 4 (read), 2 (write), 1 (execute)
 *   8+8k    4     id        uid (USER), gid (GROUP), else unused
 *
 * Entries come in tag order (USER_OBJ, USER..., GROUP_OBJ, GROUP..., MASK,
 * OTHER), one USER_OBJ, GROUP_OBJ and OTHER each, and a MASK exactly when
 * there is a named USER or GROUP entry (the kernel's posix_acl_valid).
 * The mode and the access ACL agree (docs/client.md "POSIX ACLs"): the
 * owner's bits are USER_OBJ's, the group's MASK's (GROUP_OBJ's without a
 * mask), the others' OTHER's.
 *
 * Pure functions over caller-owned bytes: no I/O, no locks.
 */
#ifndef POM_ACL_I_H
#define POM_ACL_I_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define POM_ACL_ACCESS  "system.posix_acl_access"
#define POM_ACL_DEFAULT "system.posix_acl_default"
#define POM_ACL_VERSION 2u

#define POM_ACL_USER_OBJ  0x01u
#define POM_ACL_USER      0x02u
#define POM_ACL_GROUP_OBJ 0x04u
#define POM_ACL_GROUP     0x08u
#define POM_ACL_MASK      0x10u
#define POM_ACL_OTHER     0x20u

/* 1 when name is one of the two ACL xattrs, else 0. */
int pom_acl_name(const char *name);

/* Checks an ACL value: 0 when valid, 1 when it is the header alone (no
 * ACL: setting it removes one), -EINVAL otherwise. */
int pom_acl_check(const void *v, size_t n);

/* The permission bits (0777) an access ACL gives the mode, merged into
 * *mode (its other bits kept). Returns 1 when the ACL says nothing the
 * mode cannot (three entries: it need not be stored), else 0.
 * REQUIRES: pom_acl_check(v, n) == 0. */
int pom_acl_equiv_mode(const void *v, size_t n, mode_t *mode);

/* chmod of a file with an access ACL: USER_OBJ, MASK (GROUP_OBJ without
 * one) and OTHER take mode's bits, in place.
 * REQUIRES: pom_acl_check(v, n) == 0. */
void pom_acl_chmod(void *v, size_t n, mode_t mode);

/* A new entry's access ACL from its parent's default ACL v (a copy the
 * caller owns, changed in place) and the mode it asks for (*mode, its
 * permission bits masked by the ACL's, as the kernel's posix_acl_create).
 * Returns 1 when the ACL must be stored, 0 when the mode says it all.
 * REQUIRES: pom_acl_check(v, n) == 0. */
int pom_acl_create_masq(void *v, size_t n, mode_t *mode);

#endif /* POM_ACL_I_H */

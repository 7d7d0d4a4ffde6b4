/*
 * pom_acl.c -- POSIX ACL values (pom_acl_i.h): checking them, and keeping
 * the mode and the access ACL in agreement, as the kernel's
 * fs/posix_acl.c does for a local file system (a FUSE file system stores
 * both itself: docs/client.md "POSIX ACLs").
 *
 * Invariants:
 *  (1) Every function but pom_acl_check and pom_acl_name takes a value
 *      pom_acl_check accepted (asserted), so it walks whole entries and
 *      finds USER_OBJ, GROUP_OBJ and OTHER.
 *  (2) Only permission bits change: tags and ids are never rewritten, so
 *      a stored value stays valid.
 *
 * Floor 2 of libpomegranate (floors.txt): calls nothing of the library.
 */
#include "pom_acl_i.h"

#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#define HDR   4
#define ENTRY 8

static unsigned get16(const uint8_t *p)
{
    return (unsigned)p[0] | (unsigned)p[1] << 8;
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_perm(uint8_t *e, unsigned perm)
{
    e[2] = (uint8_t)(perm & 7);
    e[3] = 0;
}

int pom_acl_name(const char *name)
{
    return strcmp(name, POM_ACL_ACCESS) == 0 || strcmp(name, POM_ACL_DEFAULT) == 0;
}

int pom_acl_check(const void *v, size_t n)
{
    const uint8_t *p = v;
    if (n < HDR || (n - HDR) % ENTRY || get32(p) != POM_ACL_VERSION)
        return -EINVAL;
    if (n == HDR)
        return 1;
    /* The states of the kernel's posix_acl_valid: the tag each entry may
     * have after the previous one. */
    unsigned state = POM_ACL_USER_OBJ;
    bool needs_mask = false;
    for (size_t off = HDR; off < n; off += ENTRY) {
        unsigned tag = get16(p + off), perm = get16(p + off + 2);
        if (perm & ~7u)
            return -EINVAL;
        switch (tag) {
        case POM_ACL_USER_OBJ:
            if (state != POM_ACL_USER_OBJ)
                return -EINVAL;
            state = POM_ACL_USER;
            break;
        case POM_ACL_USER:
            if (state != POM_ACL_USER)
                return -EINVAL;
            needs_mask = true;
            break;
        case POM_ACL_GROUP_OBJ:
            if (state != POM_ACL_USER)
                return -EINVAL;
            state = POM_ACL_GROUP;
            break;
        case POM_ACL_GROUP:
            if (state != POM_ACL_GROUP)
                return -EINVAL;
            needs_mask = true;
            break;
        case POM_ACL_MASK:
            if (state != POM_ACL_GROUP)
                return -EINVAL;
            state = POM_ACL_OTHER;
            break;
        case POM_ACL_OTHER:
            if (state != POM_ACL_OTHER && (state != POM_ACL_GROUP || needs_mask))
                return -EINVAL;
            state = 0;
            break;
        default:
            return -EINVAL;
        }
    }
    return state == 0 ? 0 : -EINVAL;
}

int pom_acl_equiv_mode(const void *v, size_t n, mode_t *mode)
{
    assert(pom_acl_check(v, n) == 0); /* invariant (1) */
    const uint8_t *p = v;
    mode_t m = *mode & ~(mode_t)0777;
    int equiv = 1;
    for (size_t off = HDR; off < n; off += ENTRY) {
        unsigned perm = get16(p + off + 2);
        switch (get16(p + off)) {
        case POM_ACL_USER_OBJ:
            m |= (mode_t)perm << 6;
            break;
        case POM_ACL_GROUP_OBJ: /* before MASK (valid order): a mask wins */
        case POM_ACL_MASK:
            m = (m & ~(mode_t)070) | (mode_t)perm << 3;
            if (get16(p + off) == POM_ACL_GROUP_OBJ)
                break;
            equiv = 0;
            break;
        case POM_ACL_OTHER:
            m |= perm;
            break;
        default: /* named users and groups */
            equiv = 0;
            break;
        }
    }
    *mode = m;
    return equiv;
}

void pom_acl_chmod(void *v, size_t n, mode_t mode)
{
    assert(pom_acl_check(v, n) == 0); /* invariant (1) */
    uint8_t *p = v, *group_obj = NULL, *mask = NULL;
    for (size_t off = HDR; off < n; off += ENTRY) {
        uint8_t *e = p + off;
        switch (get16(e)) {
        case POM_ACL_USER_OBJ:
            put_perm(e, (unsigned)(mode >> 6));
            break;
        case POM_ACL_GROUP_OBJ:
            group_obj = e;
            break;
        case POM_ACL_MASK:
            mask = e;
            break;
        case POM_ACL_OTHER:
            put_perm(e, (unsigned)mode);
            break;
        default:
            break;
        }
    }
    assert(group_obj != NULL);
    put_perm(mask ? mask : group_obj, (unsigned)(mode >> 3));
}

int pom_acl_create_masq(void *v, size_t n, mode_t *mode)
{
    assert(pom_acl_check(v, n) == 0); /* invariant (1) */
    uint8_t *p = v, *group_obj = NULL, *mask = NULL;
    mode_t m = *mode;
    int store = 0;
    for (size_t off = HDR; off < n; off += ENTRY) {
        uint8_t *e = p + off;
        unsigned perm = get16(e + 2);
        switch (get16(e)) {
        case POM_ACL_USER_OBJ:
            perm &= (unsigned)(m >> 6);
            put_perm(e, perm);
            m &= (mode_t)(perm << 6) | ~(mode_t)0700;
            break;
        case POM_ACL_GROUP_OBJ:
            group_obj = e;
            break;
        case POM_ACL_MASK:
            mask = e;
            store = 1;
            break;
        case POM_ACL_OTHER:
            perm &= (unsigned)m;
            put_perm(e, perm);
            m &= (mode_t)perm | ~(mode_t)07;
            break;
        default:
            store = 1;
            break;
        }
    }
    assert(group_obj != NULL);
    uint8_t *g = mask ? mask : group_obj;
    unsigned perm = get16(g + 2) & (unsigned)(m >> 3);
    put_perm(g, perm);
    m &= (mode_t)(perm << 3) | ~(mode_t)070;
    *mode = m;
    return store;
}

/*
 * xt_crash.c -- see xt_crash.h. The armed name and count are written only by
 * xt_crash_arm/xt_crash_disarm, before (or after) the threads that pass the
 * points run; passes count with an atomic add, so exactly one thread sees the
 * N-th pass.
 */
#include "xt_crash.h"

#include "xt_common.h"

#include <assert.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

int xt_crash_armed_;
static char armed_name[XT_CRASH_NAME_MAX + 1];
static unsigned long armed_nth; /* >= 1 when armed */
static unsigned long passes;    /* atomic: passes of armed_name since arming */

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
}

bool xt_crash_spec_parse(const char *spec, char *name, unsigned long *nth)
{
    if (!spec)
        return false;
    size_t len = strcspn(spec, ":");
    if (len == 0 || len > XT_CRASH_NAME_MAX)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!name_char(spec[i]))
            return false;
    unsigned long n = 1;
    if (spec[len] == ':') {
        const char *num = spec + len + 1;
        if (*num < '1' || *num > '9') /* no sign, no blank, no leading 0 */
            return false;
        char *end = NULL;
        errno = 0;
        n = strtoul(num, &end, 10);
        if (errno || *end)
            return false;
    }
    assert(n >= 1);
    if (name) {
        memcpy(name, spec, len);
        name[len] = '\0';
    }
    if (nth)
        *nth = n;
    return true;
}

int xt_crash_arm(const char *spec)
{
    char name[XT_CRASH_NAME_MAX + 1];
    unsigned long nth;
    if (!xt_crash_spec_parse(spec, name, &nth))
        return -EINVAL;
    __atomic_store_n(&xt_crash_armed_, 0, __ATOMIC_SEQ_CST);
    memcpy(armed_name, name, sizeof name);
    armed_nth = nth;
    __atomic_store_n(&passes, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&xt_crash_armed_, 1, __ATOMIC_RELEASE);
    XT_INFO("crash point %s armed (pass %lu)", armed_name, armed_nth);
    return 0;
}

void xt_crash_disarm(void)
{
    __atomic_store_n(&xt_crash_armed_, 0, __ATOMIC_SEQ_CST);
}

void xt_crash_pass_(const char *name)
{
    assert(name);
    /* Acquire: pairs with the arming's release, so the name is complete. */
    if (!__atomic_load_n(&xt_crash_armed_, __ATOMIC_ACQUIRE) || strcmp(name, armed_name) != 0)
        return;
    assert(armed_nth >= 1);
    unsigned long n = __atomic_add_fetch(&passes, 1, __ATOMIC_RELAXED);
    if (n != armed_nth)
        return;
    XT_WARN("crash point %s reached (pass %lu): SIGKILL", name, n);
    raise(SIGKILL);
}

void xt_crash_point(const char *name)
{
    XT_CRASH_POINT(name);
}

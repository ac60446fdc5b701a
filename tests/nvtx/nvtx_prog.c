/*
 * NVTX from C through the nvtx3 headers (tests/nvtx/nvtx_check.py c): default-domain push/pop (ASCII,
 * wide, attributes), a domain with a registered string, ranges started on one thread and ended on
 * another (default domain and the domain), marks.  Prints the levels nvtxRangePush/Pop return: with
 * an injection tracking the stack they are depths, without one NVTX_NO_PUSH_POP_TRACKING (-2).
 */
#include <pthread.h>
#include <stdio.h>
#include <wchar.h>

#include <nvtx3/nvToolsExt.h>

static nvtxDomainHandle_t domain;
static nvtxRangeId_t across_id, domain_across_id;

static void *ender(void *arg)
{
	(void)arg;
	nvtxRangeEnd(across_id);
	nvtxDomainRangeEnd(domain, domain_across_id);
	return NULL;
}

int main(void)
{
	int levels[8], n = 0;
	levels[n++] = nvtxRangePushA("outer");
	levels[n++] = nvtxRangePushW(L"inner-\u00fc");
	nvtxMarkA("mark-a");
	levels[n++] = nvtxRangePop();

	domain = nvtxDomainCreateA("mydomain");
	nvtxStringHandle_t reg = nvtxDomainRegisterStringA(domain, "registered");
	nvtxEventAttributes_t attr = {0};
	attr.version = NVTX_VERSION;
	attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	attr.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
	attr.message.registered = reg;
	levels[n++] = nvtxDomainRangePushEx(domain, &attr);   /* 0: the domain's own stack */
	nvtxDomainMarkEx(domain, &attr);

	nvtxEventAttributes_t ascii = attr;
	ascii.messageType = NVTX_MESSAGE_TYPE_ASCII;
	ascii.message.ascii = "across";
	across_id = nvtxRangeStartEx(&ascii);
	ascii.message.ascii = "domain-across";
	domain_across_id = nvtxDomainRangeStartEx(domain, &ascii);
	pthread_t t;
	pthread_create(&t, NULL, ender, NULL);
	pthread_join(t, NULL);

	levels[n++] = nvtxDomainRangePop(domain);
	levels[n++] = nvtxRangePop();   /* outer */
	printf("levels:");
	for (int i = 0; i < n; i++)
		printf(" %d", levels[i]);
	printf("\n");
	return 0;
}

package api

import (
	"cmp"
	"slices"

	"github.com/corralhq/corral/commands/apipb"
)

func sortQuotas(q []*apipb.QuotaView) {
	slices.SortFunc(q, func(a, b *apipb.QuotaView) int {
		return cmp.Or(cmp.Compare(a.User, b.User), cmp.Compare(a.Band, b.Band))
	})
}

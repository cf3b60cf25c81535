package api

import (
	"cmp"
	"context"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/projections"
)

func (s *Service) SetPriceSheet(ctx context.Context, r *apipb.SetPriceSheetRequest) (*apipb.MutationReply, error) {
	return s.mutate(ctx, r, func(m commands.Meta) (commands.Command, error) {
		return commands.SetPriceSheet{Meta: m, Sheet: r.Sheet}, nil
	})
}

func (s *Service) CloseBillingPeriod(ctx context.Context, r *apipb.CloseBillingPeriodRequest) (*apipb.MutationReply, error) {
	return s.mutate(ctx, r, func(m commands.Meta) (commands.Command, error) {
		var start time.Time
		if r.PeriodStartUs != 0 {
			start = time.UnixMicro(r.PeriodStartUs).UTC()
		}
		return commands.CloseBillingPeriod{Meta: m, Start: start}, nil
	})
}

// GetPriceSheets returns every price sheet the log holds, the one in force
// at at_us marked, and the closed billing periods.
func (s *Service) GetPriceSheets(ctx context.Context, r *apipb.GetPriceSheetsRequest) (*apipb.PriceSheetList, error) {
	out := &apipb.PriceSheetList{}
	err := s.read(ctx, r.Read, func(st *projections.State) error {
		at := r.AtUs
		if at == 0 {
			at = s.m.Now().UnixMicro()
		}
		inForce, ok := st.SheetAt(at)
		for _, p := range st.PriceSheets {
			out.Sheets = append(out.Sheets, &apipb.PriceSheetView{Position: p.Position, SetUs: p.SetUS, Sheet: p.Sheet,
				InForce: ok && p.Position == inForce.Position})
		}
		for start, pos := range st.ClosedPeriods {
			_, end := projections.BillingPeriodOf(time.UnixMicro(start))
			out.Closed = append(out.Closed, &apipb.ClosedPeriodView{PeriodStartUs: start, PeriodEndUs: end.UnixMicro(), Position: pos})
		}
		slices.SortFunc(out.Closed, func(a, b *apipb.ClosedPeriodView) int { return cmp.Compare(a.PeriodStartUs, b.PeriodStartUs) })
		return nil
	})
	return out, err
}

// scopeCosts narrows *user, the costs a request asks for, to those ctx's
// caller may read (commands.CostsScope): PermissionDenied naming the
// field when it asks for another user's.
func (s *Service) scopeCosts(ctx context.Context, user *string) error {
	a, err := s.actor(ctx)
	if err != nil {
		return err
	}
	scope, err := commands.CostsScope(a, *user)
	if err != nil {
		return status.Error(codes.PermissionDenied, err.Error())
	}
	*user = scope
	return nil
}

// Costs answers a period's showback from the Infrastore, of the costs
// the caller may read (commands.CostsScope).
func (s *Service) Costs(ctx context.Context, r *apipb.CostsRequest) (*apipb.CostsReply, error) {
	if err := s.scopeCosts(ctx, &r.User); err != nil {
		return nil, err
	}
	if s.Analytics == nil {
		return nil, status.Error(codes.Unimplemented, "this master runs no Infrastore")
	}
	out, err := s.Analytics.Costs(ctx, r)
	return out, master.Status(ctx, err)
}

// ExportBill streams a bill from the Infrastore in chunks: a month of a
// large cell's FOCUS rows is gigabytes, which no reply may hold. It
// holds the costs the caller may read (commands.CostsScope).
func (s *Service) ExportBill(r *apipb.BillRequest, stream apipb.Cell_ExportBillServer) error {
	ctx := stream.Context()
	if err := s.scopeCosts(ctx, &r.User); err != nil {
		return err
	}
	if s.Analytics == nil {
		return status.Error(codes.Unimplemented, "this master runs no Infrastore")
	}
	err := s.Analytics.ExportBill(ctx, r, func(b []byte) error { return stream.Send(&apipb.BillChunk{Data: b}) })
	return master.Status(ctx, err)
}

package dynamo_test

import (
	"fmt"
	"regexp"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/acmebank/authserver/shared/oauth"
)

// TestListings_SpreadOverShardsAndKeepItemsWrittenBefore: the users' and the clients' GSI1
// listing partitions are write-sharded (a bulk import is not one hot index partition): 64
// users land in many USERS#nn partitions, an update keeps a user's partition, and the listing
// still returns every user in UID order, including one written in the unsharded layout of
// before (gsi1pk USERS); the same for clients.
func TestListings_SpreadOverShardsAndKeepItemsWrittenBefore(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	at := now()
	shard := regexp.MustCompile(`^(USERS|CLIENTS)#(0[0-9]|1[0-5])$`)
	gsi1pk := func(pk, sk string) string {
		t.Helper()
		v, _ := rawItem(t, f, pk, sk)["gsi1pk"].(*types.AttributeValueMemberS)
		if v == nil {
			t.Fatalf("%s has no gsi1pk", pk)
		}
		return v.Value
	}
	unshard := func(pk, sk, base string) { // the layout of items written before the shards
		t.Helper()
		_, err := f.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(f.table),
			Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: sk}},
			UpdateExpression:          aws.String("SET gsi1pk = :base"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":base": &types.AttributeValueMemberS{Value: base}},
		})
		mustNil(t, err)
	}

	var uids []string
	partitions := map[string]bool{}
	for i := range 64 {
		u := oauth.User{UID: fmt.Sprintf("u_%03d", i), Username: fmt.Sprintf("user%03d", i), CreatedAt: at}
		mustNil(t, f.store.CreateUser(ctx, u))
		uids = append(uids, u.UID)
		p := gsi1pk("USER#"+u.UID, "USER")
		if !shard.MatchString(p) || p[:5] != "USERS" {
			t.Fatalf("user %s is listed in partition %q, want USERS#00 to USERS#15", u.UID, p)
		}
		partitions[p] = true
	}
	if len(partitions) < 8 {
		t.Fatalf("64 users landed in %d listing partitions, want them spread (at least 8 of 16)", len(partitions))
	}
	before := gsi1pk("USER#u_007", "USER")
	mustNil(t, f.store.UpdateUser(ctx, "u_007", func(u oauth.User) (oauth.User, error) { u.Disabled = true; return u, nil }))
	if after := gsi1pk("USER#u_007", "USER"); after != before {
		t.Fatalf("an update moved the user from %s to %s", before, after)
	}
	unshard("USER#u_011", "USER", "USERS")
	users, err := f.store.ListUsers(ctx)
	mustNil(t, err)
	var listed []string
	for _, u := range users {
		listed = append(listed, u.UID)
	}
	if !slices.Equal(listed, uids) {
		t.Fatalf("ListUsers = %v, want every user in UID order %v", listed, uids)
	}

	var ids []string
	for i := range 20 {
		c := oauth.Client{ID: fmt.Sprintf("cl_%03d", i), Name: "Client", CreatedAt: at}
		mustNil(t, f.store.CreateClient(ctx, c))
		ids = append(ids, c.ID)
		if p := gsi1pk("CLIENT#"+c.ID, "CLIENT"); !shard.MatchString(p) || p[:7] != "CLIENTS" {
			t.Fatalf("client %s is listed in partition %q", c.ID, p)
		}
	}
	unshard("CLIENT#cl_004", "CLIENT", "CLIENTS")
	clients, err := f.store.ListClients(ctx)
	mustNil(t, err)
	var listedClients []string
	for _, c := range clients {
		listedClients = append(listedClients, c.ID)
	}
	if !slices.Equal(listedClients, ids) {
		t.Fatalf("ListClients = %v, want %v", listedClients, ids)
	}
}

#include "service/set_wire.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "furrballs/v1/furrballs.pb.h"

namespace furrballs::service {
namespace {

// `bytes` cut into chunks of `chunk` bytes (the last may be shorter).
std::vector<absl::string_view> Cut(absl::string_view bytes, size_t chunk) {
  std::vector<absl::string_view> out;
  for (size_t at = 0; at < bytes.size(); at += chunk) {
    out.push_back(bytes.substr(at, chunk));
  }
  return out;
}

v1::MultiSetRequest ThreeItems() {
  v1::MultiSetRequest r;
  v1::SetRequest* a = r.add_items();
  a->set_key("alpha");
  a->set_value(std::string(300, 'a'));
  a->set_ttl_ms(1500);
  v1::SetRequest* b = r.add_items();
  b->set_key("beta");
  b->set_mode(v1::SET_IF_VERSION);
  b->set_expected_version(uint64_t{1} << 40);
  v1::SetRequest* c = r.add_items();
  c->set_key("gamma");
  c->set_value("xyz");
  c->set_mode(v1::SET_IF_ABSENT);
  return r;
}

// Parses `bytes` cut into `chunk`-byte chunks and compares every item with
// protobuf's reading of the same bytes.
void ExpectReadsAsProtobuf(absl::string_view bytes, size_t chunk) {
  SCOPED_TRACE(testing::Message() << "chunks of " << chunk);
  v1::MultiSetRequest theirs;
  ASSERT_TRUE(theirs.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())));
  const SlicedBytes sliced(Cut(bytes, chunk));
  std::vector<SetItemSpans> items;
  ASSERT_TRUE(ParseMultiSetRequest(sliced, &items).ok());
  size_t count = 0;
  ASSERT_TRUE(CountMultiSetItems(sliced, &count).ok());
  EXPECT_EQ(count, items.size());
  ASSERT_EQ(items.size(), static_cast<size_t>(theirs.items_size()));
  for (size_t i = 0; i < items.size(); ++i) {
    const v1::SetRequest& want = theirs.items(static_cast<int>(i));
    std::string copy;
    EXPECT_EQ(sliced.View(items[i].key.offset, items[i].key.length, &copy),
              want.key());
    EXPECT_EQ(sliced.View(items[i].value.offset, items[i].value.length, &copy),
              want.value());
    EXPECT_EQ(items[i].ttl_ms, want.ttl_ms());
    EXPECT_EQ(items[i].mode, static_cast<int32_t>(want.mode()));
    EXPECT_EQ(items[i].expected_version, want.expected_version());
  }
}

TEST(SetWireTest, ReadsWhatProtobufWritesInAnyChunking) {
  const std::string bytes = ThreeItems().SerializeAsString();
  for (size_t chunk : {size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{64},
                       bytes.size()}) {
    ExpectReadsAsProtobuf(bytes, chunk);
  }
}

TEST(SetWireTest, EmptyChunksAnywhereChangeNothing) {
  const std::string bytes = ThreeItems().SerializeAsString();
  std::vector<absl::string_view> chunks = {absl::string_view()};
  for (absl::string_view c : Cut(bytes, 5)) {
    chunks.push_back(c);
    chunks.push_back(absl::string_view());
  }
  const SlicedBytes sliced(chunks);
  std::vector<SetItemSpans> items;
  ASSERT_TRUE(ParseMultiSetRequest(sliced, &items).ok());
  ASSERT_EQ(items.size(), 3u);
  std::string copy;
  EXPECT_EQ(sliced.View(items[2].key.offset, items[2].key.length, &copy),
            "gamma");
  EXPECT_EQ(sliced.View(items[0].value.offset, items[0].value.length, &copy),
            std::string(300, 'a'));
}

// What the service relies on for memory: a value inside one chunk is not
// copied, and one across chunks is copied into the caller's buffer.
TEST(SetWireTest, ViewCopiesOnlyWhatSpansChunks) {
  const std::string bytes = ThreeItems().SerializeAsString();
  const SlicedBytes one({bytes});
  std::vector<SetItemSpans> items;
  ASSERT_TRUE(ParseMultiSetRequest(one, &items).ok());
  std::string copy;
  absl::string_view v =
      one.View(items[0].value.offset, items[0].value.length, &copy);
  EXPECT_GE(v.data(), bytes.data());
  EXPECT_LE(v.data() + v.size(), bytes.data() + bytes.size());
  EXPECT_TRUE(copy.empty());

  const SlicedBytes cut(Cut(bytes, 100));
  v = cut.View(items[0].value.offset, items[0].value.length, &copy);
  EXPECT_EQ(v.data(), copy.data());
  EXPECT_EQ(v, std::string(300, 'a'));
}

// Unknown fields of every wire type, and a known field sent with another
// wire type, are skipped as protobuf skips them; a field read twice keeps
// the last value.
TEST(SetWireTest, SkipsUnknownFieldsAndKeepsTheLastValue) {
  std::string item;
  item += std::string("\x0a\x03old", 5);              // key "old"
  item += std::string("\x0a\x03key", 5);              // key again: "key"
  item += std::string("\x12\x01v", 3);                // value "v"
  item += std::string("\x18\x05", 2);                 // ttl 5
  item += std::string("\x18\x07", 2);                 // ttl again: 7
  item += std::string("\x1d\x01\x02\x03\x04", 5);     // field 3 as fixed32
  item += std::string("\x31", 1) + std::string(8, 'x');  // field 6, fixed64
  item += std::string("\x3a\x02zz", 4);               // field 7, bytes
  item += std::string("\x40\x96\x01", 3);             // field 8, varint
  item += std::string("\x12\x00", 2);                 // value again: ""
  item += std::string("\x12\x02vv", 4);               // value again: "vv"
  std::string msg;
  msg += std::string("\x08\x01", 2);                  // field 1 as a varint
  msg += std::string("\x15") + std::string(4, 'y');   // field 2, fixed32
  msg += "\x0a" + std::string(1, static_cast<char>(item.size())) + item;
  msg += std::string("\x22\x00", 2);                  // field 4, empty bytes
  for (size_t chunk : {size_t{1}, size_t{4}, msg.size()}) {
    ExpectReadsAsProtobuf(msg, chunk);
  }
  std::vector<SetItemSpans> items;
  const SlicedBytes sliced({msg});
  ASSERT_TRUE(ParseMultiSetRequest(sliced, &items).ok());
  ASSERT_EQ(items.size(), 1u);
  std::string copy;
  EXPECT_EQ(sliced.View(items[0].key.offset, items[0].key.length, &copy), "key");
  EXPECT_EQ(sliced.View(items[0].value.offset, items[0].value.length, &copy),
            "vv");
  EXPECT_EQ(items[0].ttl_ms, 7u);
}

// The error for `bytes` cut into 3-byte chunks (and the same in one chunk).
std::string ErrorOf(absl::string_view bytes) {
  std::vector<SetItemSpans> items;
  const absl::Status cut = ParseMultiSetRequest(SlicedBytes(Cut(bytes, 3)), &items);
  const absl::Status whole = ParseMultiSetRequest(SlicedBytes({bytes}), &items);
  EXPECT_EQ(cut, whole);
  EXPECT_EQ(cut.code(), absl::StatusCode::kInvalidArgument);
  return std::string(cut.message());
}

TEST(SetWireTest, MalformedInputSaysWhatWasWrong) {
  // A tag cut off by the end of the message.
  EXPECT_EQ(ErrorOf(std::string("\x0a\x02\x0a\x00\x80", 5)),
            "the varint at byte 4 is cut off by the end of its message "
            "(byte 5)");
  // An item's length past the end of the message.
  EXPECT_EQ(ErrorOf("\x0a\x09\x0a\x01k"),
            "field 1's length 9 at byte 2 runs past the end of its message "
            "(3 bytes left)");
  // A value's length past the end of its item (not of the message).
  EXPECT_EQ(ErrorOf(std::string("\x0a\x03\x12\x05v\x0a\x00", 7)),
            "item 0 (bytes 2 to 5): field 2's length 5 at byte 4 runs past "
            "the end of its message (1 bytes left)");
  // A truncated varint inside an item: its TTL.
  EXPECT_EQ(ErrorOf("\x0a\x02\x18\xff"),
            "item 0 (bytes 2 to 4): the varint at byte 3 is cut off by the "
            "end of its message (byte 4)");
  // A varint of 11 bytes.
  EXPECT_EQ(ErrorOf("\x08" + std::string(10, '\xff') + "\x01"),
            "the varint at byte 1 is longer than 10 bytes");
  // Tags and lengths of more than 5 bytes, which protobuf refuses (a
  // 10-byte varint reader took them: found by review, 2026-11-25).
  EXPECT_EQ(ErrorOf(std::string("\x8a\x80\x80\x80\x80\x00\x01k", 8)),
            "the tag at byte 0 is longer than 5 bytes");
  EXPECT_EQ(ErrorOf(std::string("\x0a\x86\x80\x80\x80\x80\x00\x0a\x01k"
                                "\x12\x01v",
                                13)),
            "the length at byte 1 is longer than 5 bytes");
  // A length of 2^31 in 5 bytes.
  EXPECT_EQ(ErrorOf(std::string("\x0a\x80\x80\x80\x80\x08", 6)),
            "field 1's length 2147483648 at byte 1 is not below 2^31");
  // A 5-byte tag of 2^32 or more.
  EXPECT_EQ(ErrorOf(std::string("\x8a\x80\x80\x80\x70\x00", 6)),
            "the tag at byte 0 (30064771082) has field number 3758096385, "
            "not 1 to 2^29-1");
  // Field number 0.
  EXPECT_EQ(ErrorOf(std::string("\x0a\x02\x02\x00", 4)),
            "item 0 (bytes 2 to 4): the tag at byte 2 (2) has field number "
            "0, not 1 to 2^29-1");
  // A group, and a wire type that does not exist.
  EXPECT_EQ(ErrorOf("\x0b\x0c"),
            "field 1 before byte 1 is a group (wire type 3), which this "
            "server does not accept");
  EXPECT_EQ(ErrorOf("\x0a\x01\x0e"),
            "item 0 (bytes 2 to 3): field 1 before byte 3 has wire type 6, "
            "which does not exist");
  // A fixed64 field with 3 bytes left.
  EXPECT_EQ(ErrorOf("\x09\x01\x02\x03"),
            "field 1 at byte 1 needs 8 bytes, 3 are left in its message");
}

TEST(SetWireTest, CountsItemsWithoutReadingThem) {
  v1::MultiSetRequest r = ThreeItems();
  r.add_items();  // an empty item is still an item
  const std::string bytes = r.SerializeAsString();
  size_t count = 0;
  ASSERT_TRUE(CountMultiSetItems(SlicedBytes(Cut(bytes, 2)), &count).ok());
  EXPECT_EQ(count, 4u);
  // Only the top level is read: a broken item is counted, the parse
  // refuses it.
  const std::string broken("\x0a\x02\x12\x05", 4);
  ASSERT_TRUE(CountMultiSetItems(SlicedBytes({broken}), &count).ok());
  EXPECT_EQ(count, 1u);
  EXPECT_FALSE(CountMultiSetItems(SlicedBytes({absl::string_view("\x0a\x05", 2)}),
                                  &count)
                   .ok());
}

TEST(SetWireTest, EmptyMessageHasNoItems) {
  std::vector<SetItemSpans> items(3);
  EXPECT_TRUE(ParseMultiSetRequest(SlicedBytes(), &items).ok());
  EXPECT_TRUE(items.empty());
}

}  // namespace
}  // namespace furrballs::service

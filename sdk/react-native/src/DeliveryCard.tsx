import { Pressable, StyleSheet, Text, View } from 'react-native'
import type { components } from '@rxtrace/sdk/schema'
import { ColdChainBadge } from './ColdChainBadge.js'

type Delivery = components['schemas']['Delivery']

/** One delivery in the driver's list: status, when it is due, its cold chain; no patient field is shown (the API sends none). */
export function DeliveryCard({ delivery, onPress }: { delivery: Delivery; onPress?: (delivery: Delivery) => void }) {
  const due = new Date(delivery.eta)
  return (
    <Pressable
      onPress={() => onPress?.(delivery)}
      accessibilityRole="button"
      accessibilityLabel={`Delivery ${delivery.id}, ${delivery.status}`}
      style={styles.card}
    >
      <View style={styles.row}>
        <Text style={styles.status}>{delivery.status.replace(/_/g, ' ')}</Text>
        <Text style={styles.due}>due {due.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })}</Text>
      </View>
      <Text style={styles.id}>{delivery.id}</Text>
      {delivery.cold_chain.required ? <ColdChainBadge coldChain={delivery.cold_chain} /> : null}
    </Pressable>
  )
}

const styles = StyleSheet.create({
  card: { padding: 16, borderRadius: 8, backgroundColor: '#fff', marginVertical: 6, elevation: 1 },
  row: { flexDirection: 'row', justifyContent: 'space-between', marginBottom: 4 },
  status: { fontSize: 16, fontWeight: '700' },
  due: { fontSize: 14, color: '#455a64' },
  id: { fontSize: 12, color: '#607d8b', marginBottom: 8 },
})
